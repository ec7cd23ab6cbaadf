"""Which data a candidate moved to the host to compute there (an anti-cheat check).

A token Triton launch followed by the answer computed with numpy or Python lists escapes a check
that weighs torch calls only. Host computation needs the data on the host first, and every way a
candidate may reach it goes through a torch call that `HostWork` (a torch function mode, like
`kernelband.evaluate.torch_work.TorchWork`) sees: `numpy()`/`__array__` (numpy), `tolist()`
(Python lists), `item()`/`float()`/`int()`/`bool()` (scalars, one element each: a loop over them
adds up), `.cpu()`/`.to("cpu")` of a device tensor, and the raw storage. The elements exported
are weighed together with the torch work, against the same limit (`host_work_problem`).
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
    """Counts tensor elements the candidate exported to the host while the mode is on."""

    def __init__(self) -> None:
        super().__init__()
        self.elements = 0
        self.ops: dict[str, int] = {}

    def _add(self, name: str, n: int) -> None:
        self.elements += n
        self.ops[name] = self.ops.get(name, 0) + n

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        tensor = _first_tensor(args)
        if tensor is not None and not launches.inside_launch() and not _benchmarking():
            if name in WHOLE_EXPORTS:
                self._add(name, int(tensor.numel()))
            elif name in SCALAR_EXPORTS:
                self._add(name, 1)
            elif name in HOST_MOVES and _moves_to_host(name, tensor, args, kwargs):
                self._add(f"{name}(host)", int(tensor.numel()))
        return func(*args, **kwargs)

    def top(self) -> str:
        """The largest exports, as text for a rejection message."""
        ranked = sorted(self.ops.items(), key=lambda item: -item[1])[:3]
        return ", ".join(f"{name} ({n} elements)" for name, n in ranked)


def host_work_problem(host: HostWork, torch_elements: int, inputs: int, limit: float,
                      allowance: int = 0) -> tuple[str, str] | None:
    """`(reason, message)` when host exports plus torch work reach `limit` x input elements.

    `allowance`: elements the original kernel itself spends outside Triton (0: none granted).
    """
    if host.elements == 0:
        return None
    total = host.elements + torch_elements - allowance
    if total < limit * max(inputs, 1):
        return None
    return ("decoy_host_compute",
            f"the candidate moved data to the host to compute there ({host.top()}; with torch work "
            f"{host.elements + torch_elements} elements against {inputs} input elements); compute "
            "the result in the Triton kernel (numpy, Python lists and item() loops do not count)")
