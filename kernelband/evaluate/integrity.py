"""Checks that the harness itself was not tampered with, and clean-up between runs.

- `TimerSeal`: the timer, event and statistics functions a measurement relies on are the same
  objects after a candidate ran as before it was loaded (patching them fakes a time).
- `output_problem`: a result is made of plain, materialised tensors (no subclass that answers
  comparisons itself, no meta/lazy or nested tensor that defers work into the checker).
- `stash_and_scrub`: the reference's outputs are copied away and their memory overwritten before
  the candidate runs, and on a GPU the caching allocator's free blocks are overwritten too, so a
  candidate that returns uninitialised memory finds zeros there, not the reference's answer.
- `reset_l2_persistence`: no L2 persisting-access window survives from one run to the next.
- `launch_streams`: Triton launches made on a stream other than the timed one.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
from typing import Any

import torch

from kernelband.evaluate.compare import tensors
from kernelband.problem.fair import zero_free_cuda_memory

# (module, dotted attribute) pairs whose identity a measurement depends on.
SEALED: tuple[tuple[str, str], ...] = (
    ("time", "perf_counter"), ("time", "perf_counter_ns"), ("time", "monotonic"),
    ("time", "monotonic_ns"), ("time", "time"), ("time", "time_ns"), ("time", "process_time"),
    ("statistics", "median"), ("statistics", "mean"), ("statistics", "fmean"),
    ("statistics", "quantiles"), ("statistics", "pstdev"), ("statistics", "stdev"),
    ("torch", "allclose"), ("torch", "equal"), ("torch", "isnan"), ("torch", "isclose"),
    ("torch.cuda", "Event"), ("torch.cuda", "synchronize"), ("torch.cuda", "Event.record"),
    ("torch.cuda", "Event.elapsed_time"), ("torch.cuda", "Event.synchronize"),
    ("torch.Tensor", "__eq__"), ("torch.Tensor", "clone"),
    ("triton.testing", "do_bench"),
    ("kernelband.profile.timing", "summarize"), ("kernelband.profile.timing", "measure"),
    ("kernelband.evaluate.compare", "compare_results"),
)
# Zero bytes: the reference's values are gone, and an honest kernel that reads memory it never
# wrote (a masked store's tail, a scratch buffer) sees what a fresh allocation usually holds,
# as in the reference's own run. All-ones bytes (NaN) refused such originals on an H100.
POISON_BYTE = 0x00


def _resolve(module: str, dotted: str) -> Any:
    try:
        obj: Any = importlib.import_module(module)
    except ImportError:
        return None
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
    return obj


class TimerSeal:
    """Remembers the identity of every SEALED object; `broken()` names one that changed."""

    def __init__(self) -> None:
        self.objects = {f"{m}.{a}": _resolve(m, a) for m, a in SEALED}

    def broken(self) -> str | None:
        for (module, attr), (name, obj) in zip(SEALED, self.objects.items(), strict=True):
            if _resolve(module, attr) is not obj:
                return name
        return None


def output_problem(out: Any) -> str | None:
    """Why a result is not made of plain, materialised tensors, or None."""
    for t in tensors(out):
        if type(t) is not torch.Tensor:
            return (f"a result is a {type(t).__name__} (a torch.Tensor subclass); return plain "
                    "torch.Tensor objects")
        if t.device.type == "meta" or t.is_nested or t.layout != torch.strided:
            return (f"a result is not a materialised dense tensor (device {t.device.type}, layout "
                    f"{t.layout}); return plain dense tensors holding the values")
    return None


def synchronize() -> None:
    """Wait for every stream of the current CUDA device (no-op without CUDA)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def poison(t: torch.Tensor) -> None:
    """Overwrite a tensor's whole storage with POISON_BYTE."""
    with contextlib.suppress(RuntimeError):
        t.untyped_storage().fill_(POISON_BYTE)  # type: ignore[attr-defined]


def scrub_free_memory() -> int:
    """Overwrite the CUDA caching allocator's free blocks (with zeros, POISON_BYTE); returns the
    bytes scrubbed."""
    return zero_free_cuda_memory()


def stash(out: Any) -> Any:
    """A private copy of a result, leaving the result itself as it is."""
    return _clone_tree(out)


def stash_and_scrub(out: Any, protected: Any = ()) -> Any:
    """A private copy of the reference's result; the original's memory is poisoned and freed.

    Tensors sharing storage with `protected` (the reference's inputs, its model's weights) are
    copied but left intact: the reference still needs them.
    """
    stash = _clone_tree(out)
    keep = {_storage_ptr(t) for t in tensors(protected)}
    for t in tensors(out):
        if type(t) is torch.Tensor and t.device.type != "meta" and _storage_ptr(t) not in keep:
            poison(t)
    scrub_free_memory()
    return stash


def _storage_ptr(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):
        return -1


def _clone_tree(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, list | tuple):
        return type(value)(_clone_tree(v) for v in value) if type(value) in (list, tuple) else [
            _clone_tree(v) for v in value]
    if isinstance(value, dict):
        return {k: _clone_tree(v) for k, v in value.items()}
    return value


_CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06


def reset_l2_persistence() -> bool:
    """Reset persisting L2 lines and set their limit to 0 (driver API); False where not possible."""
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return False
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    ok = int(libcuda.cuCtxResetPersistingL2Cache()) == 0
    ok &= int(libcuda.cuCtxSetLimit(_CU_LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(0))) == 0
    return ok


def current_stream() -> int | None:
    """The current CUDA stream's handle, or None without an initialised CUDA context."""
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return None
    return int(torch.cuda.current_stream().cuda_stream)


def launch_streams(records: list[Any], timed_stream: Any) -> list[str]:
    """Names of captured launches made on a stream other than `timed_stream`."""
    return [r.kernel_name for r in records
            if getattr(r, "stream", None) is not None and r.stream != timed_stream]


def snapshot_out(out: Any) -> Any:
    """Clones of a result's plain tensors (other values, subclasses included, as they are)."""
    if isinstance(out, torch.Tensor):
        plain = type(out) is torch.Tensor and out.device.type != "meta"
        return out.detach().clone() if plain else out
    if isinstance(out, list | tuple):
        items = [snapshot_out(o) for o in out]
        return type(out)(items) if type(out) in (list, tuple) else items
    if isinstance(out, dict):
        return {k: snapshot_out(v) for k, v in out.items()}
    return out
