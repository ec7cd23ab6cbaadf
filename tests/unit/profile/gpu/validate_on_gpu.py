"""Run on a GPU node: checks launch capture, static profile vs driver, timing, ncu and the
estimate against measured times. Prints a JSON summary (not a pytest module).

Usage: TRITON_CACHE_DIR=/tmp/tc python tests/unit/profile/gpu/validate_on_gpu.py OUT.json
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
import triton

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))

from kernelband.problem import load_problem  # noqa: E402
from kernelband.profile.archs import GPUS, target_for_capability  # noqa: E402
from kernelband.profile.estimate import estimate_case  # noqa: E402
from kernelband.profile.gpu import measure_on_gpu  # noqa: E402
from kernelband.profile.launches import capture_launches  # noqa: E402
from kernelband.profile.measure import estimate_candidate  # noqa: E402
from kernelband.profile.ncu import find_ncu, run_ncu  # noqa: E402
from kernelband.profile.static import static_profile  # noqa: E402
from kernelband.profile.timing import CudaDevice, TimingConfig, measure, measure_paired  # noqa: E402


def fixture_kernels() -> Any:
    spec = importlib.util.spec_from_file_location("fixture_kernels", ROOT / "tests/unit/profile/fixtures/kernels.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def variants(k: Any) -> dict[str, Any]:
    n = 1 << 24
    x = torch.randn(n + 1, device="cuda")
    y = torch.randn(n + 1, device="cuda")
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    b = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    s = torch.randn(4096, 4096, device="cuda")
    return {
        "add_b1024_w4": lambda: k.add(x[:n], y[:n], 1024, 4),
        "add_b1024_w4_misaligned": lambda: k.add(x[1:], y[1:], 1024, 4),
        "add_b32_w4": lambda: k.add(x[:n], y[:n], 32, 4),
        "add_b128_w1": lambda: k.add(x[:n], y[:n], 128, 1),
        "add_b4096_w8": lambda: k.add(x[:n], y[:n], 4096, 8),
        "add_small_n4096": lambda: k.add(x[:4096], y[:4096], 1024, 4),
        "softmax_4096": lambda: k.softmax(s, 4096, 8),
        "matmul_2048_64x64x32_s3": lambda: k.matmul(a, b, 64, 64, 32, 4, 3),
        "matmul_2048_128x128x32_s3_w8": lambda: k.matmul(a, b, 128, 128, 32, 8, 3),
        "matmul_2048_16x16x16": lambda: k.matmul(a, b, 16, 16, 16, 4, 2),
    }


def _constant(fn: Any) -> Any:
    def prepare() -> Any:
        return fn

    return prepare


def driver_occupancy(compiled: Any, threads: int) -> dict[str, int]:
    """Blocks/SM, static shared bytes and registers as the CUDA driver reports them."""
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")
    fn = ctypes.c_void_p(int(compiled.function))
    dynamic = int(compiled.metadata.shared)
    blocks, static_smem, regs = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(blocks), fn, threads, dynamic)
    cuda.cuFuncGetAttribute(ctypes.byref(static_smem), 1, fn)  # CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
    cuda.cuFuncGetAttribute(ctypes.byref(regs), 4, fn)  # CU_FUNC_ATTRIBUTE_NUM_REGS
    return {"driver_blocks_per_sm": blocks.value, "driver_static_smem": static_smem.value,
            "driver_dynamic_smem": dynamic, "driver_attr_regs": regs.value}


def kernel_rows(device: CudaDevice, gpu_name: str) -> list[dict[str, Any]]:
    rows = []
    gpu = GPUS[gpu_name]
    for name, fn in variants(fixture_kernels()).items():
        with capture_launches() as records:
            fn()
        torch.cuda.synchronize()
        record = records[0]
        started = time.perf_counter()
        static = static_profile(record, 90)
        cold = time.perf_counter() - started
        started = time.perf_counter()
        static_profile(record, 90)
        warm = time.perf_counter() - started
        compiled = record.compiled
        stats = measure(device, _constant(fn), TimingConfig(budget_ms=300.0))
        est = estimate_case([(record, static)], gpu)
        rows.append({
            "variant": name, "measured_ms": stats.median_ms, "cv": stats.cv, "reps": stats.reps,
            "estimated_ms": est.time_ms, "ratio_est_over_measured": est.time_ms / stats.median_ms,
            "limiter": est.launches[0].limiter,
            "static_regs": static.registers_per_thread, "driver_regs": getattr(compiled, "n_regs", None),
            "static_smem": static.shared_mem_bytes,
            "driver_smem": getattr(getattr(compiled, "metadata", None), "shared", None),
            "driver_spills": getattr(compiled, "n_spills", None), "static_local": static.local_bytes,
            "occupancy_pct": static.occupancy.occupancy_pct, "load_bits": est.launches[0].load_bits,
            "static_blocks_per_sm": static.occupancy.blocks_per_sm,
            **driver_occupancy(compiled, static.threads_per_block),
            "estimate_terms": {k: est.launches[0].to_dict()[k] for k in ("memory_ms", "compute_ms", "issue_ms",
                                                                          "wave_latency_ms", "loop_trips")},
            "estimated_h": [est.launches[0].sm_pct, est.launches[0].dram_pct, est.launches[0].l2_pct],
            "static_cold_s": cold, "static_cached_s": warm,
        })
        print(json.dumps(rows[-1]), flush=True)
    return rows


def example_rows(gpu_name: str) -> list[dict[str, Any]]:
    """Measured first, then estimated: estimating sets TRITON_INTERPRET=1 for later imports."""
    import os

    problems = [load_problem(p.read_text(), "native", p.stem) for p in sorted((ROOT / "examples").glob("*.py"))]
    rows: list[dict[str, Any]] = []
    for problem in problems:
        measured, features, _ = measure_on_gpu(problem, None, gpu_name, config=TimingConfig(budget_ms=100.0))
        rows.append({"example": problem.name, "measured": measured.to_dict(), "features": features.named()})
    for row, problem in zip(rows, problems, strict=True):
        row["estimated_ms"] = estimate_candidate(problem, None, gpu_name)[0].time_ms
        os.environ.pop("TRITON_INTERPRET", None)
    for row in rows:
        print(json.dumps(row)[:600], flush=True)
    return rows


def paired_row(device: CudaDevice) -> dict[str, Any]:
    k = fixture_kernels()
    n = 1 << 24
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    paired = measure_paired(device, lambda: (lambda: k.add(x, y, 32, 4)), lambda: (lambda: k.add(x, y, 1024, 4)),
                            TimingConfig(budget_ms=300.0))
    return paired.to_dict()


def ncu_row() -> dict[str, Any]:
    if find_ncu() is None:
        return {"ncu": "missing"}
    child = [sys.executable, str(Path(__file__)), "--ncu-child"]
    outcome = run_ncu(child, timeout_s=120.0, kernel_regex="^(add_kernel)$")
    return outcome.to_dict()


def ncu_child() -> None:
    k = fixture_kernels()
    x = torch.randn(1 << 24, device="cuda")
    k.add(x, x, 1024, 4)
    torch.cuda.synchronize()


def main(out: str) -> None:
    device = CudaDevice()
    cap = device.capability
    gpu_name = "h200" if "H200" in device.name else target_for_capability(*cap)
    summary: dict[str, Any] = {"device": device.name, "torch": torch.__version__, "triton": triton.__version__,
                               "gpu_spec": gpu_name}
    print(json.dumps(summary), flush=True)
    summary["kernels"] = kernel_rows(device, gpu_name)
    summary["paired_b32_vs_b1024"] = paired_row(device)
    print(json.dumps(summary["paired_b32_vs_b1024"]), flush=True)
    summary["ncu"] = ncu_row()
    print(json.dumps(summary["ncu"])[:3000], flush=True)
    summary["examples"] = example_rows(gpu_name)
    Path(out).write_text(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    if sys.argv[1] == "--ncu-child":
        ncu_child()
    else:
        main(sys.argv[1])
