"""The share of a candidate's GPU time spent in its own Triton kernels (torch.profiler, CUDA only).

A decoy launches a token Triton kernel and computes the answer with other GPU work (cuBLAS,
ATen elementwise kernels); its share is near zero. An honest kernel with a small epilogue is
near one. The names of the kernels the candidate launched come from the launch capture, and the
device time of every kernel from the profiler's CUDA activity.
"""

from __future__ import annotations

import contextlib
from typing import Any

from kernelband.problem.model import Case
from kernelband.profile.launches import capture_launches

PROFILED_CALLS = 3  # after one warm-up call (compilation and autotuning are not counted)


def share_of(kernel_times: dict[str, float], triton_names: set[str]) -> float | None:
    """Fraction of the summed kernel time spent in kernels named after `triton_names`."""
    total = sum(kernel_times.values())
    if total <= 0:
        return None
    mine = sum(t for name, t in kernel_times.items() if any(_matches(name, n) for n in triton_names))
    return mine / total


def _matches(profiled: str, launched: str) -> bool:
    return profiled.startswith(launched)  # Triton names the compiled kernel after the function


def _kernel_times(prof: Any) -> dict[str, float]:
    times: dict[str, float] = {}
    for event in prof.events():
        if "CUDA" not in str(getattr(event, "device_type", "")):
            continue  # CPU-side operators: their kernels are listed as events of their own
        device_us = float(event.time_range.elapsed_us())
        if device_us > 0:
            times[event.name] = times.get(event.name, 0.0) + device_us
    return times


def triton_share(runtime: Any, case: Case) -> float | None:
    """Measured share of GPU time in the candidate's Triton kernels, or None when it cannot be."""
    import torch

    if not torch.cuda.is_available():
        return None
    with contextlib.suppress(Exception):  # a profiler failure leaves the share unknown
        args = runtime.inputs(case, 1)
        with capture_launches() as records:
            runtime.candidate(args)
        names = {r.kernel_name for r in records}
        torch.cuda.synchronize()
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(PROFILED_CALLS):
                runtime.candidate(args)
            torch.cuda.synchronize()
        return share_of(_kernel_times(prof), names)
    return None
