"""Zero guard bands: a launch's tensors as views of copies with zeros on both sides.

A kernel that reads past the end of a tensor (or before its start) sees whatever memory lies
next to it: on the CPU the process heap, on a GPU the caching allocator's neighbouring blocks.
What lies there changes from one run to the next, so such a kernel disagrees with itself, and
a store there corrupts a neighbour. `GuardedCopies` copies each storage a launch receives into
a buffer on the same device with `guard_bytes(n)` zero bytes on both sides; the kernel runs on
views of those copies and `write_back()` copies the middles back when the launch ends. A read
up to the guard band past either end sees zeros in every run, and a store there is dropped.
Arguments that alias one storage share one copy.

Two users: the CPU interpreter guards every launch (`kernelband.problem.interpreter_memory`),
and on a GPU the checks guard the launches of the runs they compare
(`kernelband.problem.cuda_guard`).
"""

from __future__ import annotations

from typing import Any

# Bytes of zeros on each side of a storage: its own size, at least GUARD_MIN, at most
# GUARD_MAX (a multiple of 4096, so element offsets stay whole for every dtype).
GUARD_MIN = 64 * 1024
GUARD_MAX = 64 * 1024 * 1024


def guard_bytes(nbytes: int) -> int:
    """The zero guard band on each side of a storage of `nbytes` bytes."""
    wanted = min(max(nbytes, GUARD_MIN), GUARD_MAX)
    return -(-wanted // 4096) * 4096


class GuardedCopies:
    """The guarded copies of one launch: storage pointer -> (storage, copy, guard)."""

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
            buffer = torch.zeros(guard + nbytes + guard, dtype=torch.uint8, device=tensor.device)
            if nbytes:
                buffer[guard:guard + nbytes].copy_(_bytes_of(storage, tensor.device))
            self.copies[key] = (storage, buffer, guard)
        _, buffer, guard = self.copies[key]
        view = tensor.new_empty(0)
        offset = tensor.storage_offset() + guard // tensor.element_size()
        return view.set_(buffer.untyped_storage(), offset, tensor.size(), tensor.stride())

    def write_back(self) -> None:
        """Copy every guarded copy's middle back into its storage (on a GPU: stream-ordered
        after the launch)."""
        for storage, buffer, guard in self.copies.values():
            nbytes = storage.nbytes()
            if nbytes:
                _bytes_of(storage, buffer.device).copy_(buffer[guard:guard + nbytes])


def _bytes_of(storage: Any, device: Any) -> Any:
    """A uint8 tensor over all of `storage`."""
    import torch

    return torch.empty(0, dtype=torch.uint8, device=device).set_(storage)


def swap(value: Any, copies: GuardedCopies, guardable: Any) -> Any:
    """`value` with every tensor `guardable(tensor)` accepts (in tuples and Triton's
    TensorWrapper too) replaced by its view on a guarded copy."""
    from triton.runtime.jit import TensorWrapper

    if isinstance(value, TensorWrapper) and guardable(value.base):
        return TensorWrapper(copies.guarded(value.base), value.dtype)
    if guardable(value):
        return copies.guarded(value)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(swap(item, copies, guardable) for item in value)
    return value
