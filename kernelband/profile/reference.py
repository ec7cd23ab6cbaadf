"""The PyTorch reference as a track's baseline (a KernelBench file as published).

On a GPU the placeholder `ModelNew(Model)` is timed exactly like every candidate (KernelBench's
CUDA-event harness, kernelband/profile/gpu.py). Without a GPU there is no Triton launch for the
cost model to estimate, so the reference gets its own labelled estimate: PyTorch eager as one
kernel launch per torch operator that writes new data, each the roofline of its bytes (read and
written once at DRAM peak) and FLOPs (at the datatype's peak), plus the launch overhead the
Triton cost model also charges. Views and metadata are free. It is an optimistic model of eager
PyTorch (perfect library kernels), so a translation must beat well-tuned operators to show a
speedup. Runs in the sandbox child: it executes the user's Model.
"""

from __future__ import annotations

import tempfile
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from kernelband.problem.model import KernelProblem
from kernelband.problem.runtime import load_runtime
from kernelband.profile.archs import DEFAULT_REFERENCE_GPU, GpuSpec, resolve_target
from kernelband.profile.estimate import LAUNCH_OVERHEAD_US
from kernelband.profile.features import Features, reference_features
from kernelband.profile.measurement import Measurement

METHOD = "PyTorch eager roofline (one launch per torch op, bytes at DRAM peak, FLOPs at peak)"
_MATMUL = frozenset({"matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "linear",
                     "__matmul__", "__rmatmul__", "einsum", "bilinear"})


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def _storage(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):
        return id(t)


def _flops(name: str, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> float:
    out = sum(t.numel() for t in outputs)
    if name in _MATMUL and inputs and inputs[0].dim() >= 1:
        return 2.0 * out * inputs[0].shape[-1]
    if name.startswith("conv") and len(inputs) >= 2 and inputs[1].dim() >= 2:
        weight = inputs[1]
        per = weight.numel() / max(1, weight.shape[0])
        base = inputs[0].numel() if "transpose" in name else out
        return 2.0 * base * per
    return float(max(out, max((t.numel() for t in inputs), default=0)))


class TorchOps(TorchFunctionMode):
    """Records (name, bytes moved, FLOPs, half precision) of every torch call writing data."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, int, float, bool]] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        inputs = _tensors(args) + _tensors(kwargs)
        outputs = [t for t in _tensors(out) if t.numel()]
        shared = {_storage(t) for t in inputs}
        fresh = [t for t in outputs if _storage(t) not in shared]
        if fresh or (name.endswith("_") and not name.startswith("__") and outputs):
            written = fresh or outputs
            moved = sum(t.numel() * t.element_size() for t in inputs + written)
            half = any(t.dtype in (torch.float16, torch.bfloat16) for t in inputs)
            self.ops.append((name, moved, _flops(name, inputs, written), half))
        return out


def op_time_ms(moved: int, flops: float, half: bool, name: str, gpu: GpuSpec) -> float:
    """Roofline time of one eager operator on `gpu`, launch overhead included."""
    tensor = half and (name in _MATMUL or name.startswith("conv"))
    peak = gpu.tensor_fp16_tflops if tensor else gpu.fp32_tflops
    memory = moved / (gpu.dram_gbps * 1e9) * 1e3
    compute = flops / (peak * 1e12) * 1e3
    return LAUNCH_OVERHEAD_US * 1e-3 + max(memory, compute)


def estimate_reference(problem: KernelProblem, target: str,
                       reference_gpu: str = DEFAULT_REFERENCE_GPU) -> tuple[Measurement, Features]:
    """The labelled estimate of the PyTorch reference on `target` (no GPU needed)."""
    gpu = resolve_target(target, reference_gpu)
    case_times: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kb-reference-") as workdir:
        runtime = load_runtime(problem, None, "cpu", workdir=workdir)
        for case in problem.cases:
            args = runtime.inputs(case, 0)
            with TorchOps() as ops:
                runtime.reference(args)
            case_times[case.name] = sum(op_time_ms(m, f, h, n, gpu) for n, m, f, h in ops.ops)
    total = sum(case_times.values())
    where = f"target cpu: estimated for reference GPU {gpu.name}" if target == "cpu" else gpu.name
    measurement = Measurement("estimated", f"{METHOD} ({where})", f"{gpu.name} (not run)", target,
                              total, case_times)
    return measurement, reference_features(total, "estimate")
