"""The implausibility gate: a time too good to be true is measured again, strictly, before it counts.

A case's **physical floor** is the time its result takes to write at the GPU's peak bandwidth:
every output byte must be stored at least once, and no kernel stores faster than the memory
system's datasheet peak (L2's assumed bandwidth while the output fits in L2, DRAM's beyond it).
Reads are not counted (a kernel may legitimately skip inputs), so the floor is conservative.

A measurement is **implausible** when the candidate is more than `IMPLAUSIBLE_SPEEDUP` times
faster than its parent (paired ratio) or any case is under its floor. The gate then re-measures
it under the strict protocol: a fresh interpreter (not the warm pool), fresh randomized inputs,
every timed call verified. Only the strict result is rewarded; its method says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kernelband.evaluate.verdict import REVERIFY_SPEEDUP
from kernelband.evaluate.verified_timing import TimingRejected
from kernelband.profile.archs import GpuSpec

IMPLAUSIBLE_SPEEDUP = REVERIFY_SPEEDUP
STRICT_NOTE = ("strict re-measure (implausible first result: {why}; fresh process, fresh randomized "
               "inputs, every call verified)")


def floor_ms(output_bytes: int, gpu: GpuSpec) -> float:
    """The least time writing `output_bytes` can take on `gpu` (ms)."""
    gbps = gpu.dram_gbps * (gpu.l2_to_dram_bw_ratio if output_bytes <= gpu.l2_bytes else 1.0)
    return output_bytes / (gbps * 1e9) * 1e3


def implausible_reasons(measurement: Any) -> list[str]:
    """Why a measured result is implausible (empty: it is not). Estimates are never gated."""
    if getattr(measurement, "label", "") != "measured":
        return []
    reasons = []
    ratio = measurement.paired_ratio
    if ratio is not None and ratio > 0 and 1.0 / ratio > IMPLAUSIBLE_SPEEDUP:
        reasons.append(f"{1.0 / ratio:.1f}x faster than its parent (more than {IMPLAUSIBLE_SPEEDUP:g}x)")
    floors = getattr(measurement, "floors_ms", None) or {}
    for case, time_ms in measurement.case_times_ms.items():
        floor = floors.get(case)
        if floor is not None and time_ms < floor:
            reasons.append(f"case {case}: {time_ms:.4g} ms is under its physical floor {floor:.4g} ms")
    return reasons


Remeasure = Callable[[], tuple[Any, Any]]  # -> (Measurement, Features) under the strict protocol


def gate(measurement: Any, features: Any, remeasure: Remeasure) -> tuple[Any, Any, list[str]]:
    """`(measurement, features, reasons)`: the strict re-measure when the first is implausible.

    A timed call that disagrees raises from `remeasure`; a strict time still under a physical
    floor raises `TimingRejected("implausible_time_under_floor")`: no kernel beats the hardware.
    """
    reasons = implausible_reasons(measurement)
    if not reasons:
        return measurement, features, []
    strict, strict_features = remeasure()
    still = [r for r in implausible_reasons(strict) if "physical floor" in r]
    if still:
        raise TimingRejected("implausible_time_under_floor", "after a strict re-measure, "
                             + "; ".join(still) + "; the timer does not see the kernel's work "
                             "(side streams, deferred work?)")
    note = STRICT_NOTE.format(why="; ".join(reasons))
    return replace(strict, method=f"{note}: {strict.method}"), strict_features, reasons
