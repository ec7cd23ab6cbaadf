"""A fair harness: the reference and the candidate start every call from the same state.

`fair_scope(seed)` seeds every random number generator a kernel wrapper or test may draw from
(torch on the CPU and every CUDA device, Python's `random`, numpy) and makes new uninitialised
tensors (`torch.empty`, `empty_like`, `new_empty`, `empty_strided`) start as zeros. Without
it, a test that allocates an output with `torch.empty` and writes part of it sees whatever the
allocator left behind, which differs from one call to the next, and the original kernel would
disagree with itself. Zeros also mean a candidate cannot read another run's stale result.

Allocations the mode does not see (those autograd makes for gradients, on its own thread on a
GPU) and reads past the end of a tensor land in the CUDA caching allocator's free memory:
`zero_free_cuda_memory()` overwrites it with zeros, and a TritonBench test run starts with it
(`kernelband.problem.tritonbench.run_test`), so such a read sees zeros in every run.
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
def fair_scope(seed: int) -> Iterator[None]:
    """Same RNG states and zero-filled new tensors for the duration of one call."""
    seed_everything(seed)
    with ZeroFilledAllocations():
        yield
