"""Roofline-style cost model: an *estimated* kernel time for a GPU from its static profile.

Every figure this module returns is an estimate; docs/estimates.md describes the model,
its inputs and its limits.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from kernelband.profile.archs import GpuSpec
from kernelband.profile.launches import LaunchRecord, tensor_nbytes
from kernelband.profile.sass import flops_per_thread
from kernelband.profile.static import StaticProfile

MODEL = "roofline cost model v1"
# Assumptions, not vendor figures (see docs/estimates.md):
LAUNCH_OVERHEAD_US = 4.0  # GPU-side cost of one back-to-back kernel launch
DRAM_LATENCY_US = 0.7  # loaded DRAM round trip; each wave of blocks pays at least one
SCHEDULERS_PER_SM = 4  # warp schedulers, one warp instruction per cycle each
# Fallback FLOPs per warp-level instruction when a profile carries no shape-derived count:
# HMMA m16n8k16; HGMMA m64nNk16 shared by the 4 warps of a warpgroup, N assumed 64.
_TENSOR_FLOPS = {"HMMA": 2 * 16 * 8 * 16, "WGMMA": 2 * 64 * 64 * 16 // 4}


@dataclass(frozen=True)
class LaunchEstimate:
    """Estimated time of one launch on one GPU, with the terms that produced it."""

    kernel_name: str
    time_ms: float
    memory_ms: float
    compute_ms: float
    issue_ms: float
    wave_latency_ms: float
    waves: int
    loop_trips: float  # inferred main-loop trips (tensor-core kernels; 1 otherwise)
    bytes_moved: int
    flops: float
    load_bits: float
    bandwidth_efficiency: float
    limiter: str  # memory | compute | issue | l2 | loop_latency | latency | does_not_fit
    dram_pct: float
    l2_pct: float
    sm_pct: float
    label: str = "estimated"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def launch_bytes(record: LaunchRecord) -> int:
    """Bytes of every tensor argument: each is assumed read or written once from DRAM."""
    return sum(tensor_nbytes(v) for v in record.args.values())


def _access_bits(sass: dict[str, int]) -> float:
    widths = {k: v for k, v in sass.items() if k.startswith(("LDG.", "STG."))}
    count = sum(widths.values())
    if count == 0:
        return 128.0 if sass.get("LDGSTS") or sass.get("TMA") else 32.0  # async copies move 16 B
    return sum(int(k.split(".")[1]) * n for k, n in widths.items()) / count


def _load_bytes_per_thread(sass: dict[str, int], num_stages: int, one_pass: bool = False) -> float:
    """Bytes one thread loads from global memory in the static SASS (or in one loop pass).

    Software pipelining emits the asynchronous copies (cp.async / TMA) of every stage, so the
    static count is already what is in flight; one pass of the loop is a `num_stages`-th of it.
    """
    direct = sum(int(k.split(".")[1]) // 8 * n for k, n in sass.items() if k.startswith("LDG."))
    asynchronous = 16.0 * (sass.get("LDGSTS", 0) + 8 * sass.get("TMA", 0))
    return direct + (asynchronous / max(1, num_stages) if one_pass else asynchronous)


def dot_flops(record: LaunchRecord) -> float:
    """FLOPs of a matrix product read off its operands: M*N*K = sqrt(|A| |B| |C|) elements.

    Static instruction counts miss loop trips, so for tensor-core kernels the three largest
    tensor arguments are taken as A (M x K), B (K x N) and C (M x N).
    """
    sizes = sorted((v.numel() for v in record.args.values() if hasattr(v, "numel")), reverse=True)
    if len(sizes) < 3:
        return 0.0
    return 2.0 * math.sqrt(float(sizes[0]) * sizes[1] * sizes[2])


def _width_efficiency(bits: float) -> float:
    """Narrow accesses need more load instructions per byte and reach less bandwidth.

    Coalesced 32-bit streams lose little on H200 (53.2 vs 52.5 us measured for a 16M-element
    add, docs/estimates.md), so the penalty is mild above 32 bits and steeper below.
    """
    if bits >= 32:
        return 0.9 + 0.1 * min(bits, 128.0) / 128.0
    return 0.9 * max(bits, 8.0) / 32.0


@dataclass(frozen=True)
class _Geometry:
    """How a grid lands on the GPU."""

    blocks: int
    waves: int
    busy_sms: int
    resident_warps: int  # per busy SM
    threads: int
    warps: int


def _geometry(record: LaunchRecord, profile: StaticProfile, gpu: GpuSpec) -> _Geometry:
    blocks = max(1, record.num_blocks)
    per_sm = math.ceil(blocks / gpu.sms) * profile.num_warps
    return _Geometry(
        blocks, math.ceil(blocks / (profile.occupancy.blocks_per_sm * gpu.sms)), min(gpu.sms, blocks),
        min(profile.occupancy.warps_per_sm, per_sm), blocks * profile.threads_per_block,
        blocks * profile.num_warps,
    )


def _dram(geo: _Geometry, profile: StaticProfile, gpu: GpuSpec, nbytes: int) -> tuple[float, float, float]:
    """(memory ms, mean access bits, bandwidth efficiency) of moving `nbytes` once."""
    # Little's law: bytes in flight across the GPU against bandwidth x latency.
    in_flight = geo.busy_sms * geo.resident_warps * 32 * _load_bytes_per_thread(profile.sass, profile.num_stages)
    needed = gpu.dram_gbps * 1e3 * DRAM_LATENCY_US  # GB/s * us -> bytes
    latency_eff = min(1.0, in_flight / needed)
    bits = _access_bits(profile.sass)
    efficiency = max(1e-3, _width_efficiency(bits) * latency_eff)
    return nbytes / (gpu.dram_gbps * 1e9 * efficiency) * 1e3, bits, efficiency


def _compute(record: LaunchRecord, geo: _Geometry, profile: StaticProfile, gpu: GpuSpec) -> dict[str, float]:
    """FLOPs, loop trips and the compute, issue, L2 and loop-latency times."""
    sass = profile.sass
    flops = float(flops_per_thread(sass) * geo.threads)
    per_warp = profile.tensor_flops_per_warp or sum(_TENSOR_FLOPS[k] * sass.get(k, 0) for k in _TENSOR_FLOPS)
    static_tensor = float(per_warp * geo.warps)
    tensor = max(static_tensor, dot_flops(record)) if static_tensor else 0.0
    # The static SASS holds one pass of the main loop: the product's FLOPs tell how many passes.
    trips = max(1.0, tensor / static_tensor) if static_tensor else 1.0
    compute_ms = flops / (gpu.fp32_tflops * 1e12) * 1e3 + tensor / (gpu.tensor_fp16_tflops * 1e12) * 1e3
    compute_ms *= gpu.sms / geo.busy_sms  # a grid smaller than the GPU leaves SMs idle
    issue_rate = geo.busy_sms * SCHEDULERS_PER_SM * gpu.boost_clock_ghz * 1e9
    # every pass re-reads its tiles
    tile_bytes = trips * geo.threads * _load_bytes_per_thread(sass, profile.num_stages, one_pass=True)
    return {
        "flops": flops + tensor, "trips": trips, "tile_bytes": tile_bytes, "compute": compute_ms,
        "issue": sass.get("total", 0) * geo.warps * trips / issue_rate * 1e3,
        "l2": tile_bytes / (gpu.dram_gbps * gpu.l2_to_dram_bw_ratio * 1e9) * 1e3,
        # Each pass waits for its tiles; software pipelining overlaps (stages - 1) passes.
        "loop_latency": geo.waves * (trips - 1) * DRAM_LATENCY_US * 1e-3 / max(1, profile.num_stages - 1),
    }


def estimate_launch(record: LaunchRecord, profile: StaticProfile, gpu: GpuSpec) -> LaunchEstimate:
    """The estimated time of one launch of `profile`'s kernel on `gpu`."""
    bytes_moved = launch_bytes(record)
    if profile.occupancy.blocks_per_sm == 0:
        return LaunchEstimate(record.kernel_name, math.inf, math.inf, 0, 0, 0, 0, 1.0, bytes_moved, 0, 0, 0,
                              "does_not_fit", 0, 0, 0)
    geo = _geometry(record, profile, gpu)
    memory_ms, bits, efficiency = _dram(geo, profile, gpu, bytes_moved)
    c = _compute(record, geo, profile, gpu)
    terms = {"memory": memory_ms, "compute": c["compute"], "issue": c["issue"], "l2": c["l2"],
             "loop_latency": c["loop_latency"]}
    limiter = max(terms, key=lambda k: terms[k])
    wave_ms = geo.waves * DRAM_LATENCY_US * 1e-3
    total = LAUNCH_OVERHEAD_US * 1e-3 + terms[limiter] + wave_ms
    if wave_ms > terms[limiter]:
        limiter = "latency"
    seconds = total * 1e-3
    dram_pct = min(100.0, bytes_moved / seconds / (gpu.dram_gbps * 1e9) * 100)
    l2_bytes = max(bytes_moved, c["tile_bytes"])
    l2_pct = min(100.0, l2_bytes / seconds / (gpu.dram_gbps * gpu.l2_to_dram_bw_ratio * 1e9) * 100)
    sm_pct = min(100.0, max(c["compute"], c["issue"]) / total * 100)
    return LaunchEstimate(record.kernel_name, total, memory_ms, c["compute"], c["issue"], wave_ms, geo.waves,
                          c["trips"], bytes_moved, c["flops"], bits, efficiency, limiter, dram_pct, l2_pct,
                          sm_pct)


@dataclass(frozen=True)
class CaseEstimate:
    """All launches of one case on one GPU; `time_ms` is their sum."""

    time_ms: float
    launches: list[LaunchEstimate]
    gpu: str
    label: str = "estimated"
    method: str = MODEL

    def dominant(self) -> LaunchEstimate | None:
        """The launch that takes the most estimated time."""
        return max(self.launches, key=lambda e: e.time_ms, default=None)

    def to_dict(self) -> dict[str, Any]:
        return {"time_ms": self.time_ms, "gpu": self.gpu, "label": self.label, "method": self.method,
                "launches": [e.to_dict() for e in self.launches]}


def estimate_case(pairs: list[tuple[LaunchRecord, StaticProfile]], gpu: GpuSpec) -> CaseEstimate:
    """Estimate every launch of a case and add them up."""
    launches = [estimate_launch(record, profile, gpu) for record, profile in pairs]
    return CaseEstimate(sum(e.time_ms for e in launches), launches, gpu.name)
