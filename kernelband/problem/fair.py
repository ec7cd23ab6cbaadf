"""A fair harness: the reference and the candidate start every call from the same state.

`fair_scope(seed)` seeds every random number generator a kernel wrapper or test may draw from
(torch on the CPU and every CUDA device, Python's `random`, numpy) and makes new uninitialised
tensors (`torch.empty`, `empty_like`, `new_empty`, `empty_strided`) start as zeros. Without
it, a test that allocates an output with `torch.empty` and writes part of it sees whatever the
allocator left behind, which differs from one call to the next, and the original kernel would
disagree with itself. Zeros also mean a candidate cannot read another run's stale result.

Reads of memory no tensor of the call allocated (past the end of a tensor, or into blocks
torch's own internals reuse) land in the CUDA caching allocator's free memory:
`zero_free_cuda_memory()` overwrites it with zeros, and a TritonBench test run starts with it
(`kernelband.problem.tritonbench.run_test`), so such a read sees zeros in every run. In the
CPU Triton interpreter the same read would land in the process heap; there every launch runs
on copies of its tensors between zero guard bands (`kernelband.problem.interpreter_memory`).

Torch's autograd engine runs `torch.autograd.Function.backward` with no torch function mode
active, so inside the scope a backward runs under the modes that were active when the scope
was entered (zero-filled allocations, device remapping, the checker's counters): a backward
that allocates its gradients with `torch.empty_like` gets zeros too.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

_UNINITIALISED = frozenset({"empty", "empty_like", "new_empty", "empty_strided",
                            "new_empty_strided"})


def seed_everything(seed: int) -> None:
    """Seed torch (CPU and CUDA), Python's `random` and numpy with `seed`."""
    torch.manual_seed(seed)  # every CUDA device too, lazily where CUDA is not initialised yet
    random.seed(seed)
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy ships with torch here
        return
    np.random.seed(seed % (1 << 32))


class ZeroFilledAllocations(TorchFunctionMode):
    """New uninitialised tensors start as zeros while the mode is on."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        if getattr(func, "__name__", "") in _UNINITIALISED and isinstance(out, torch.Tensor):
            with torch.no_grad():
                out.zero_()
        return out


def zero_free_cuda_memory() -> int:
    """Overwrite the CUDA caching allocator's free blocks with zeros; returns the bytes written
    (0 without CUDA)."""
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return 0
    torch.cuda.synchronize()
    held: list[torch.Tensor] = []
    try:
        for segment in torch.cuda.memory_snapshot():
            for block in segment.get("blocks", ()):
                if block.get("state") == "inactive" and int(block.get("size", 0)) >= 512:
                    held.append(torch.zeros(int(block["size"]), dtype=torch.uint8, device="cuda"))
    except (RuntimeError, KeyError):
        pass  # out of memory while scrubbing: what was scrubbed stays scrubbed
    torch.cuda.synchronize()
    return sum(int(t.numel()) for t in held)


@contextlib.contextmanager
def _modes_in_backward(modes: list[Any]) -> Iterator[None]:
    """While active, autograd backward nodes run under `modes` (outermost first) when the
    engine has left them without any torch function mode."""
    from torch.autograd.function import BackwardCFunction
    from torch.overrides import _get_current_function_mode_stack

    original = BackwardCFunction.apply

    def apply(self: Any, *args: Any) -> Any:
        if _get_current_function_mode_stack():
            return original(self, *args)
        with contextlib.ExitStack() as stack:
            for mode in modes:
                stack.enter_context(mode)
            return original(self, *args)

    BackwardCFunction.apply = apply  # type: ignore[method-assign]
    try:
        yield
    finally:
        BackwardCFunction.apply = original  # type: ignore[method-assign]


@contextlib.contextmanager
def fair_scope(seed: int) -> Iterator[None]:
    """Same RNG states and zero-filled new tensors for the duration of one call."""
    from torch.overrides import _get_current_function_mode_stack

    seed_everything(seed)
    zeros = ZeroFilledAllocations()
    outer = list(_get_current_function_mode_stack())
    with zeros, _modes_in_backward([*outer, zeros]):
        yield
