"""Zero guard bands around a kernel's tensors in the CPU Triton interpreter.

The interpreter runs a kernel on the host memory of its tensor arguments: for a CPU tensor
that is the tensor's own storage, so a load past the end of a tensor (or before its start)
reads whatever the process heap holds next to it, which differs from one run to the next (a
freed result, another tensor, allocator bookkeeping), and a store there corrupts it.

`install()` guards every launch (`kernelband.problem.guard_bands`): each CPU storage a launch
receives is copied into a buffer with zero bytes on both sides, the kernel runs on that copy,
and the middle is copied back when the launch ends. A read up to the guard band past either
end of a tensor sees zeros in every run, and a store there is dropped; a kernel that reads
memory it never wrote then agrees with itself, and a candidate cannot read what an earlier run
left in the heap. On a GPU the checks do the same for the runs they compare
(`kernelband.problem.cuda_guard`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from kernelband.problem.guard_bands import GUARD_MAX, GUARD_MIN, GuardedCopies, guard_bytes, swap

__all__ = ["GUARD_MAX", "GUARD_MIN", "guard_bytes", "install", "running"]
_installed: list[bool] = []


def _guardable(value: Any) -> bool:
    import torch

    return (isinstance(value, torch.Tensor) and value.device.type == "cpu"
            and not value.is_sparse and value.layout == torch.strided)


# Per thread, one entry per running launch (a stack: a pre-run hook may launch another kernel):
# the launch's guarded copies and the host arguments they replaced.
_local = threading.local()


def running() -> list[tuple[GuardedCopies, Any, Any]]:
    """This thread's stack of running launches."""
    stack: list[tuple[GuardedCopies, Any, Any]] = _local.__dict__.setdefault("running", [])
    return stack


def _guarded_call(call: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call)
    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        stack = running()
        depth = len(stack)
        try:
            return call(self, *args, **kwargs)
        finally:
            del stack[depth:]  # a launch that raised leaves no copies behind

    return launch


def _guarded_init(init: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(init)
    def init_args_hst(self: Any, args_dev: Any, kwargs: dict[str, Any]) -> tuple[Any, Any]:
        args_hst, kwargs_hst = init(self, args_dev, kwargs)
        launch = GuardedCopies()
        guarded = [swap(a, launch, _guardable) for a in args_hst]
        guarded_kw = {k: swap(v, launch, _guardable) for k, v in kwargs_hst.items()}
        running().append((launch, args_hst, kwargs_hst))
        return guarded, guarded_kw

    return init_args_hst


def _guarded_restore(restore: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(restore)
    def restore_args_dev(self: Any, args_dev: Any, args_hst: Any, kwargs: dict[str, Any],
                         kwargs_hst: dict[str, Any]) -> None:
        stack = running()
        if not stack:  # not a launch this module guarded
            restore(self, args_dev, args_hst, kwargs, kwargs_hst)
            return
        launch, host, host_kw = stack.pop()
        launch.write_back()
        restore(self, args_dev, host, kwargs, host_kw)

    return restore_args_dev


def install(interpreter: Any) -> None:
    """Patch `triton.runtime.interpreter.GridExecutor` (idempotent; left alone where its layout
    differs)."""
    if _installed:
        return
    _installed.append(True)
    executor = getattr(interpreter, "GridExecutor", None)
    if executor is None or not all(hasattr(executor, name) for name in
                                   ("__call__", "_init_args_hst", "_restore_args_dev")):
        return
    executor.__call__ = _guarded_call(executor.__call__)
    executor._init_args_hst = _guarded_init(executor._init_args_hst)
    executor._restore_args_dev = _guarded_restore(executor._restore_args_dev)
