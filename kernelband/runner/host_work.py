"""Which data a candidate moved to the host to compute there (an anti-cheat check).

A token Triton launch followed by the answer computed with numpy or Python lists escapes a check
that weighs torch calls only. Host computation needs the data on the host first, and every way a
candidate may reach it goes through a torch call that `HostWork` (a torch function mode, like
`kernelband.runner.torch_work.TorchWork`) sees: `numpy()`/`__array__` (numpy), `tolist()`
(Python lists), `item()`/`float()`/`int()`/`bool()` (scalars, one element each: a loop over them
adds up), `.cpu()`/`.to("cpu")` of a device tensor, and the raw storage. The elements exported
are weighed together with the torch work, against the same limit (`host_work_problem`).
Only data that came from the call's inputs (or a model's weights) counts: their storages are
marked, and every torch call that reads a marked tensor marks what it returns, except calls that
only allocate (`empty_like(x)` carries no data). So a kernel's own result, or a test's result
packaging (`out.cpu().numpy()`), is free, and a copy of an input is not a way around the check.
Calls inside captured Triton launches (the CPU interpreter converts to numpy) and inside
`@triton.autotune` benchmarking are not counted.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from kernelband.profile import launches

WHOLE_EXPORTS = frozenset({"numpy", "__array__", "tolist", "untyped_storage", "storage", "_typed_storage"})
SCALAR_EXPORTS = frozenset({"item", "__float__", "__int__", "__bool__", "__index__", "__complex__"})
HOST_MOVES = frozenset({"cpu", "to"})
# Calls that return new memory without the argument's data (they do not pass the mark on).
ALLOCATING = frozenset({
    "empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "randint_like",
    "new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided", "new_tensor",
    "__get__", "size", "stride", "dim", "numel", "data_ptr", "is_contiguous", "element_size",
})


def _storage(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):
        return -1


def _tensors_in(value: Any) -> list[torch.Tensor]:
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return found


def _first_tensor(args: Any) -> torch.Tensor | None:
    return args[0] if args and isinstance(args[0], torch.Tensor) else None


def _moves_to_host(name: str, tensor: torch.Tensor, args: Any, kwargs: dict[str, Any]) -> bool:
    if tensor.device.type == "cpu":
        return False  # already on the host (the CPU interpreter): nothing moves
    if name == "cpu":
        return True
    targets = [*args[1:], kwargs.get("device")]
    return any(str(t) == "cpu" or (isinstance(t, torch.device) and t.type == "cpu") for t in targets)


def _benchmarking() -> bool:
    return getattr(launches._benchmarking, "depth", 0) > 0  # noqa: SLF001 - same package family


class HostWork(TorchFunctionMode):
    """Counts elements of input data the candidate exported to the host while the mode is on."""

    def __init__(self, sources: Any = ()) -> None:
        super().__init__()
        self.elements = 0
        self.ops: dict[str, int] = {}
        self.marked: set[int] = set()
        self._alive: list[Any] = []  # marked storages stay alive: a freed address is not reused
        self._mark(sources)

    def _mark(self, value: Any) -> None:
        for t in _tensors_in(value):
            ptr = _storage(t)
            if ptr not in (-1, 0) and ptr not in self.marked:
                self.marked.add(ptr)
                self._alive.append(t.untyped_storage())

    def _is_marked(self, value: Any) -> bool:
        return any(_storage(t) in self.marked for t in _tensors_in(value))

    def _add(self, name: str, n: int) -> None:
        self.elements += n
        self.ops[name] = self.ops.get(name, 0) + n

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if launches.inside_launch() or _benchmarking() or not self.marked:
            return func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        tensor = _first_tensor(args)
        marked = self._is_marked((args, kwargs))
        if tensor is not None and marked:
            if name in WHOLE_EXPORTS:
                self._add(name, int(tensor.numel()))
            elif name in SCALAR_EXPORTS:
                self._add(name, 1)
            elif name in HOST_MOVES and _moves_to_host(name, tensor, args, kwargs):
                self._add(f"{name}(host)", int(tensor.numel()))
        result = func(*args, **kwargs)
        if marked and name not in ALLOCATING:
            self._mark(result)
        return result

    def top(self) -> str:
        """The largest exports, as text for a rejection message."""
        ranked = sorted(self.ops.items(), key=lambda item: -item[1])[:3]
        return ", ".join(f"{name} ({n} elements)" for name, n in ranked)


def host_work_problem(host: HostWork, torch_elements: int, inputs: int, limit: float,
                      allowance: int = 0) -> str | None:
    """What was exported, when host exports plus torch work reach `limit` x input elements
    (the check `decoy_host_compute` of `kernelband.runner.checks`).

    `allowance`: elements the original kernel itself spends outside Triton (0: none granted).
    """
    if host.elements == 0:
        return None
    total = host.elements + torch_elements - allowance
    if total < limit * max(inputs, 1):
        return None
    return (f"the candidate moved data to the host to compute there ({host.top()}; with torch work "
            f"{host.elements + torch_elements} elements against {inputs} input elements); compute "
            "the result in the Triton kernel (numpy, Python lists and item() loops do not count)")
