"""Helpers shared by the problem tests (imported by module name; pytest puts this folder first)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def results_close(out: Any, ref: Any, tol: tuple[float, float]) -> bool:
    """Tensors (possibly nested in lists/tuples/dicts) equal within (atol, rtol)."""
    import torch

    if isinstance(ref, dict):
        return set(out) == set(ref) and all(results_close(out[k], ref[k], tol) for k in ref)
    if isinstance(ref, list | tuple):
        return len(out) == len(ref) and all(
            results_close(o, r, tol) for o, r in zip(out, ref, strict=True)
        )
    if isinstance(ref, torch.Tensor):
        return (
            isinstance(out, torch.Tensor)
            and out.shape == ref.shape
            and torch.allclose(out.float(), ref.float(), atol=tol[0], rtol=tol[1])
        )
    return bool(out == ref)


def kernel_module(source: str, name: str, folder: Path) -> ModuleType:
    """Write `source` to `folder/name.py` and import it as module `name` (Triton reads a
    kernel's source from its file, so kernels in tests need a real file)."""
    path = folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
