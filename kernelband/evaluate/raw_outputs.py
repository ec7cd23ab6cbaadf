"""Reading a runner's raw outputs in the judge: weights-only loads that execute nothing.

`read_outputs(workdir, names)` is what the judge passes to `run_sandboxed(collect=...)`: it runs
after the child ended and loads exactly the files the judge named (never a file the runner
chose), each with `torch.load(weights_only=True, map_location="cpu")` from a regular file opened
without following links. A file that is missing, not regular, too large or not loadable that
way is an `Unreadable` with its reason, never an exception.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# Must match kernelband.runner.outputs.OUTPUT_DIR (a test holds the two together; the judge
# never imports the runner).
OUTPUT_DIR = "kb-outputs"
MAX_OUTPUT_BYTES = 2 * 1024**3  # as the sandbox's per-file limit (SandboxLimits.max_file_bytes)


@dataclass(frozen=True)
class Unreadable:
    """A named output the judge could not load; `reason` is `missing` or `not_plain`."""

    reason: str
    detail: str


def _load(path: str, max_bytes: int) -> Any:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO must not block us
    except FileNotFoundError:
        return Unreadable("missing", "the runner wrote no such file")
    except OSError as exc:  # a link, or a name that is not a file
        return Unreadable("not_plain", f"not a regular file ({exc.strerror})")
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            return Unreadable("not_plain", "not a regular file")
        if info.st_size > max_bytes:
            return Unreadable("not_plain", f"{info.st_size} bytes, more than {max_bytes}")
        try:
            return torch.load(f, weights_only=True, map_location="cpu")
        except Exception as exc:  # a pickle that needs more than tensors and plain containers
            return Unreadable("not_plain", f"not loadable as plain tensors ({type(exc).__name__}: "
                              f"{str(exc).splitlines()[0][:200] if str(exc) else ''})")


def load_output(path: str, max_bytes: int = MAX_OUTPUT_BYTES) -> Any:
    """One output file a runner wrote (any path the judge chose), loaded, or an `Unreadable`."""
    return _load(path, max_bytes)


def read_outputs(workdir: str, names: list[str], max_bytes: int = MAX_OUTPUT_BYTES) -> dict[str, Any]:
    """Each named output, loaded, or an `Unreadable`."""
    folder = os.path.join(workdir, OUTPUT_DIR)
    return {name: _load(os.path.join(folder, name), max_bytes) for name in names}


def collector(names: list[str], max_bytes: int = MAX_OUTPUT_BYTES) -> Callable[[str], dict[str, Any]]:
    """A `collect` function for `run_sandboxed` that reads `names`."""
    return lambda workdir: read_outputs(workdir, names, max_bytes)
