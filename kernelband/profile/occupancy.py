"""Theoretical occupancy from a kernel's resources and an architecture's limits."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kernelband.profile.archs import ArchLimits


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks and warps per SM, and which resource limits them."""

    blocks_per_sm: int
    warps_per_sm: int
    occupancy_pct: float
    limiter: str  # warps | blocks | registers | shared_memory | too_many_threads | ...
    limits: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def _blocks_by_registers(arch: ArchLimits, regs_per_thread: int, warps_per_block: int) -> int:
    if regs_per_thread <= 0:
        return arch.max_blocks_per_sm
    regs_per_warp = _round_up(regs_per_thread * arch.warp_size, arch.reg_alloc_unit)
    # Each scheduler (sub-partition) owns a quarter of the register file, so warps are
    # counted per sub-partition, as the occupancy calculator does.
    warps_per_partition = (arch.regs_per_sm // arch.sub_partitions) // regs_per_warp
    return (warps_per_partition * arch.sub_partitions) // warps_per_block


def _blocks_by_smem(arch: ArchLimits, smem_per_block: int) -> int:
    if smem_per_block <= 0:
        return arch.max_blocks_per_sm
    per_block = _round_up(smem_per_block + arch.reserved_smem_per_block, arch.smem_alloc_unit)
    return arch.smem_per_sm // per_block


def theoretical_occupancy(
    arch: ArchLimits, num_warps: int, regs_per_thread: int, smem_per_block: int
) -> Occupancy:
    """Occupancy of a block of `num_warps` warps using the given registers and shared memory."""
    if num_warps * arch.warp_size > arch.max_threads_per_block:
        return Occupancy(0, 0, 0.0, "too_many_threads", {})
    if regs_per_thread > arch.max_regs_per_thread:
        return Occupancy(0, 0, 0.0, "registers_over_thread_limit", {})
    if smem_per_block > arch.max_smem_per_block:
        return Occupancy(0, 0, 0.0, "shared_memory_over_block_limit", {})
    limits = {
        "warps": arch.max_warps_per_sm // num_warps,
        "blocks": arch.max_blocks_per_sm,
        "registers": _blocks_by_registers(arch, regs_per_thread, num_warps),
        "shared_memory": _blocks_by_smem(arch, smem_per_block),
    }
    limiter = min(limits, key=lambda k: limits[k])
    blocks = limits[limiter]
    warps = blocks * num_warps
    return Occupancy(blocks, warps, 100.0 * warps / arch.max_warps_per_sm, limiter, limits)
