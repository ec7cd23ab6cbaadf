"""On a GPU, the runs a check compares launch their kernels between zero guard bands.

A kernel that reads past the end of one of its tensors reads the caching allocator's
neighbouring block on a GPU: another tensor of the test, or a block an earlier run left behind.
The fair harness zeroes the allocator's free blocks before a test run
(`kernelband.problem.fair.zero_free_cuda_memory`), but a neighbour in use keeps its contents,
and those differ from run to run (random inputs drawn later, a result, an index tensor). Such a
kernel then disagrees with itself, or reads an index out of a neighbour and faults.

Inside `guarded_launches()` every Triton launch on CUDA tensors runs on guarded copies of its
tensors (`kernelband.problem.guard_bands`): reads up to the guard band past either end see
zeros in every run, stores there are dropped, and the middles are copied back, ordered on the
launch's stream, before the launch returns. The checks use it for the runs they compare (the
original at load, reference and candidate); timing never does, so a timed kernel runs on its own
tensors. Launches made by `@triton.autotune` while it times its configs stay unguarded, so the
configuration it picks is the one it would pick outside the check.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kernelband.problem.guard_bands import GuardedCopies, swap

# A storage larger than this is passed as it is: copying it (and two bands) for every launch
# would cost more memory and time than a check can spend. Test inputs are far smaller.
MAX_GUARDED_BYTES = 1 << 30
# Which tensors are guarded: CUDA tensors (tests point this at "cpu" to run the wrapper).
DEVICE_TYPE = "cuda"
_MARK = "_kernelband_cuda_guard"
_state = threading.local()


def _depth(name: str) -> int:
    return int(getattr(_state, name, 0))


def _guardable(value: Any) -> bool:
    import torch

    return (isinstance(value, torch.Tensor) and value.device.type == DEVICE_TYPE
            and value.layout == torch.strided and not value.is_sparse
            and value.untyped_storage().nbytes() <= MAX_GUARDED_BYTES)


def guarded_run(original: Callable[..., Any]) -> Callable[..., Any]:
    """`JITFunction.run` that, inside `guarded_launches()`, runs the launch on guarded copies."""

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _depth("active") or _depth("benchmarking") or kwargs.get("warmup"):
            return original(self, *args, **kwargs)
        import torch

        copies = GuardedCopies()
        # the copies are the harness's work, not the kernel's: no torch function mode (the
        # checker's torch-work counters, zero-filled allocations) sees them
        with torch._C.DisableTorchFunction():
            guarded = [swap(a, copies, _guardable) for a in args]
            guarded_kw = {k: v if k in ("grid", "warmup") else swap(v, copies, _guardable)
                          for k, v in kwargs.items()}
        try:
            return original(self, *guarded, **guarded_kw)
        finally:
            with torch._C.DisableTorchFunction():
                copies.write_back()

    setattr(run, _MARK, True)
    run.__wrapped__ = original  # type: ignore[attr-defined]
    return run


def _counting_bench(original: Callable[..., Any]) -> Callable[..., Any]:
    def _bench(self: Any, *args: Any, **kwargs: Any) -> Any:
        _state.benchmarking = _depth("benchmarking") + 1
        try:
            return original(self, *args, **kwargs)
        finally:
            _state.benchmarking -= 1

    setattr(_bench, _MARK, True)
    _bench.__wrapped__ = original  # type: ignore[attr-defined]
    return _bench


def _ensure_installed() -> None:
    """Wrap `JITFunction.run` and `Autotuner._bench` unless they are wrapped already (a launch
    capture that was installed before this and removed since restores what it found)."""
    from triton.runtime import autotuner, jit

    run = jit.JITFunction.__dict__["run"]
    if not getattr(run, _MARK, False):
        jit.JITFunction.run = guarded_run(run)  # type: ignore[method-assign]
    bench_cls = getattr(autotuner, "Autotuner", None)
    bench = bench_cls.__dict__.get("_bench") if bench_cls is not None else None
    if bench is not None and not getattr(bench, _MARK, False):
        bench_cls._bench = _counting_bench(bench)  # type: ignore[union-attr]


def remove_guard() -> None:
    """Put back the `JITFunction.run` and `Autotuner._bench` the guard wrapped, where its wrappers
    are still the ones in place: a process that goes on to time launches (a timing runner that
    ran a check) then launches through the same code as one that never checked."""
    from triton.runtime import autotuner, jit

    for cls, name in ((jit.JITFunction, "run"), (getattr(autotuner, "Autotuner", None), "_bench")):
        current = cls.__dict__.get(name) if cls is not None else None
        if current is not None and getattr(current, _MARK, False):
            setattr(cls, name, current.__wrapped__)


@contextmanager
def guarded_launches() -> Iterator[None]:
    """Guard every Triton launch on CUDA tensors made by this thread inside the block."""
    _ensure_installed()
    _state.active = _depth("active") + 1
    try:
        yield
    finally:
        _state.active -= 1
