"""Raw outputs a runner hands to the judge: one `torch.save` file per call, plus an index.

The judge names every file in the runner's payload and loads each with
`torch.load(weights_only=True)`, so what is written here must be plain: tensors and lists,
tuples, dicts, numbers, strings, booleans and None. The index is for people and tools that
look at a workdir; the judge never decides anything from it.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

import torch

OUTPUT_DIR = "kb-outputs"  # under the runner's working directory (its sandbox workdir)
INDEX_NAME = "index.json"


def _plain_tensor(t: torch.Tensor) -> torch.Tensor:
    """The tensor detached; copied when it views a larger storage (the file holds the storage)."""
    t = t.detach()
    if type(t) is not torch.Tensor or t.device.type == "meta" or t.layout != torch.strided:
        return t  # saved as it is: the judge's weights-only load or its checks refuse it
    spans = int(t.untyped_storage().nbytes())
    return t if spans == t.numel() * t.element_size() and t.is_contiguous() else t.contiguous().clone()


def plain_tree(value: Any) -> Any:
    """`value` with containers made plain (subclasses of list/tuple/dict to their base type),
    numpy arrays as tensors and numpy scalars as Python numbers; other objects become their
    `repr` (compared as text: two objects without value equality never matched anyway)."""
    if isinstance(value, torch.Tensor):
        return _plain_tensor(value)
    if value is None or isinstance(value, bool | int | float | complex | str):
        return value
    if type(value).__module__ == "numpy":
        return torch.as_tensor(value) if getattr(value, "shape", ()) != () else value.item()
    if isinstance(value, tuple):
        return tuple(plain_tree(v) for v in value)
    if isinstance(value, list):
        return [plain_tree(v) for v in value]
    if isinstance(value, dict):
        return {plain_tree(k) if isinstance(k, str | int) else repr(k): plain_tree(v)
                for k, v in value.items()}
    return f"<{type(value).__name__}> {value!r}"[:2000]


def output_path(name: str) -> str:
    """Where the file the judge named `name` goes (relative to the working directory)."""
    if os.sep in name or name.startswith("."):
        raise ValueError(f"an output name must be a plain file name, got {name!r}")
    return os.path.join(OUTPUT_DIR, name)


def save_file(value: Any, path: str) -> int:
    """`torch.save` through memory, then one Python write: torch's own file writer does not
    retry a write a signal interrupts (the compile budget's timer ticks in every runner), and
    a short write leaves a file the judge cannot read. Returns the bytes written."""
    buffer = io.BytesIO()
    torch.save(value, buffer)
    data = buffer.getbuffer()
    with open(path, "wb") as f:
        f.write(data)  # Python retries an interrupted write (PEP 475)
    return len(data)


def write_output(name: str, value: Any) -> int:
    """Save one call's result (already an output structure) as `name`; returns its bytes."""
    os.makedirs(OUTPUT_DIR, exist_ok=True)
    return save_file(plain_tree(value), output_path(name))


def write_index(entries: list[dict[str, Any]]) -> None:
    """The list of files written, with the role, case label and seed of each."""
    os.makedirs(OUTPUT_DIR, exist_ok=True)
    with open(os.path.join(OUTPUT_DIR, INDEX_NAME), "w", encoding="utf-8") as f:
        json.dump({"entries": entries}, f)
