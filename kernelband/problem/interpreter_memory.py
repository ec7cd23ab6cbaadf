"""Zero guard bands around a kernel's tensors in the CPU Triton interpreter.

The interpreter runs a kernel on the host memory of its tensor arguments: for a CPU tensor
that is the tensor's own storage, so a load past the end of a tensor (or before its start)
reads whatever the process heap holds next to it, which differs from one run to the next (a
freed result, another tensor, allocator bookkeeping), and a store there corrupts it. On a GPU
such a read lands in the CUDA caching allocator's memory, whose free blocks the fair harness
zeroes (`kernelband.problem.fair.zero_free_cuda_memory`).

`install()` gives every launch the same guarantee: each CPU storage a launch receives is copied
into a buffer with `guard_bytes(n)` zero bytes on both sides, the kernel runs on that copy, and
the middle is copied back when the launch ends. A read up to the guard band past either end of
a tensor sees zeros in every run, and a store there is dropped; a kernel that reads memory it
never wrote then agrees with itself, and a candidate cannot read what an earlier run left in
the heap. Arguments that alias one storage share one copy.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

# Bytes of zeros on each side of a storage: its own size, at least GUARD_MIN, at most
# GUARD_MAX (a multiple of 4096, so element offsets stay whole for every dtype).
GUARD_MIN = 64 * 1024
GUARD_MAX = 64 * 1024 * 1024
_installed: list[bool] = []


def guard_bytes(nbytes: int) -> int:
    """The zero guard band on each side of a storage of `nbytes` bytes."""
    wanted = min(max(nbytes, GUARD_MIN), GUARD_MAX)
    return -(-wanted // 4096) * 4096


class _Launch:
    """The guarded copies of one launch: storage pointer -> (host storage, copy, guard)."""

    def __init__(self) -> None:
        self.copies: dict[int, tuple[Any, Any, int]] = {}

    def guarded(self, tensor: Any) -> Any:
        """`tensor` as a view of its storage's guarded copy (the copy is made once)."""
        import torch

        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key not in self.copies:
            nbytes = storage.nbytes()
            guard = guard_bytes(nbytes)
            buffer = torch.zeros(guard + nbytes + guard, dtype=torch.uint8)
            if nbytes:
                buffer[guard:guard + nbytes].copy_(
                    torch.empty(0, dtype=torch.uint8).set_(storage))
            self.copies[key] = (storage, buffer, guard)
        _, buffer, guard = self.copies[key]
        view = tensor.new_empty(0)
        offset = tensor.storage_offset() + guard // tensor.element_size()
        return view.set_(buffer.untyped_storage(), offset, tensor.size(), tensor.stride())

    def write_back(self) -> None:
        """Copy every guarded copy's middle back into its host storage."""
        import torch

        for storage, buffer, guard in self.copies.values():
            nbytes = storage.nbytes()
            if nbytes:
                torch.empty(0, dtype=torch.uint8).set_(storage).copy_(buffer[guard:guard + nbytes])


def _guardable(value: Any) -> bool:
    import torch

    return (isinstance(value, torch.Tensor) and value.device.type == "cpu"
            and not value.is_sparse and value.layout == torch.strided)


def _swap(value: Any, launch: _Launch) -> Any:
    """`value` with every CPU tensor in it (tuples included) on its guarded copy."""
    from triton.runtime.jit import TensorWrapper

    if isinstance(value, TensorWrapper) and _guardable(value.base):
        return TensorWrapper(launch.guarded(value.base), value.dtype)
    if _guardable(value):
        return launch.guarded(value)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_swap(item, launch) for item in value)
    return value


# Per thread, one entry per running launch (a stack: a pre-run hook may launch another kernel):
# the launch's guarded copies and the host arguments they replaced.
_local = threading.local()


def running() -> list[tuple[_Launch, Any, Any]]:
    """This thread's stack of running launches."""
    stack: list[tuple[_Launch, Any, Any]] = _local.__dict__.setdefault("running", [])
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
        launch = _Launch()
        guarded = [_swap(a, launch) for a in args_hst]
        guarded_kw = {k: _swap(v, launch) for k, v in kwargs_hst.items()}
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
