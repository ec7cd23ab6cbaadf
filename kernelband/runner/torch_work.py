"""Which torch computation a candidate did outside its Triton kernels (an anti-cheat check).

A generator that cannot write the kernel may launch a token kernel and compute the answer with
torch (`torch.softmax`, `a @ b`). `TorchWork` is a torch function mode: it sees every torch
function and Tensor method the candidate's code calls (not the calls torch makes inside them),
skips those inside captured Triton launches (the CPU interpreter moves data with torch), and
sums the tensor elements that computing calls read. Allocation, views, copies, casts and
metadata are free: wrappers need them to prepare arguments and outputs. (A function mode, not a
dispatch mode: entering a dispatch mode imports torch._dynamo, which fails while the CPU device
scope has replaced torch.cuda functions.)

With a `RegionScope`, only calls made while a function of the editable region is on the stack
count: a TritonBench test builds its inputs and glue outside the region, and that harness work
is the same for every candidate. The check weighs a candidate's region work against the
original's own (`allowance`), in the same harness and case.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from kernelband.problem.region_scope import RegionScope
from kernelband.profile.launches import inside_launch

# torch functions and Tensor methods that only allocate, reshape, view, move, cast or describe
# data (by name; `__get__` is a property such as `.shape` or `.is_cuda`).
DATA_MOVEMENT = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
    "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full",
    "new_tensor", "fill_", "zero_", "arange", "tensor", "as_tensor", "from_numpy", "view",
    "view_as", "reshape", "reshape_as", "as_strided", "expand", "expand_as", "permute",
    "transpose", "t", "squeeze", "unsqueeze", "flatten", "unflatten", "narrow", "split",
    "chunk", "unbind", "detach", "contiguous", "clone", "copy_", "to", "cuda", "cpu", "float",
    "half", "bfloat16", "double", "int", "long", "short", "bool", "type", "type_as", "cat",
    "concat", "concatenate", "stack", "pad", "size", "stride", "dim", "ndimension", "numel",
    "nelement", "element_size", "data_ptr", "is_contiguous", "storage_offset",
    "untyped_storage", "is_floating_point", "is_complex", "get_device", "item", "tolist",
    "numpy", "record_stream", "requires_grad_", "__getitem__", "__setitem__", "__len__",
    "__get__", "__set__", "__format__", "__repr__", "__index__", "__int__", "__float__",
    "__bool__", "__hash__", "__array__",
    # module construction (KernelBench's ModelNew builds its parameters inside the call)
    "uniform_", "normal_", "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_",
    "xavier_normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "manual_seed",
    "_has_compatible_shallow_copy_type", "_make_subclass", "_calculate_fan_in_and_fan_out",
})


def _elements(args: Any) -> int:
    """Elements of every tensor among an operator's arguments (nested lists included)."""
    total = 0
    stack = [args]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            total += int(item.numel())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return total


# A candidate may compute with torch as much as the original does, plus this share of it (the
# same code can read a few more elements run to run, e.g. a data-dependent masked_select).
TORCH_WORK_SLACK = 0.05


def allowance(original_elements: int) -> float:
    """The most torch work a candidate may do once past the free share of its inputs: the
    original's own in the same harness and case, plus TORCH_WORK_SLACK."""
    return original_elements * (1.0 + TORCH_WORK_SLACK)


class TorchWork(TorchFunctionMode):
    """Records torch calls that compute, made outside Triton launches, while the mode is on."""

    def __init__(self, region: RegionScope | None = None) -> None:
        super().__init__()
        self.region = region
        self.elements = 0  # summed over computing calls: the tensor elements each one read
        self.ops: dict[str, int] = {}  # function name -> elements, for the message

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if (name not in DATA_MOVEMENT and not inside_launch()
                and (self.region is None or self.region.on_stack())):
            read = _elements(args) + _elements(kwargs)
            if read:
                self.elements += read
                self.ops[name] = self.ops.get(name, 0) + read
        return func(*args, **kwargs)

    @staticmethod
    def input_elements(args: list[Any]) -> int:
        """Elements in the tensor arguments of a call (what the work is compared with)."""
        return sum(int(a.numel()) for a in args if isinstance(a, torch.Tensor))

    def top(self) -> str:
        """The heaviest compute operators, as text for a rejection message."""
        ranked = sorted(self.ops.items(), key=lambda item: -item[1])[:3]
        return ", ".join(f"torch {name} ({n} elements)" for name, n in ranked)
