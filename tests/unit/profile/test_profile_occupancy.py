"""Theoretical occupancy against cases computed by hand with the occupancy-calculator rules."""

from __future__ import annotations

import pytest

from kernelband.profile.archs import ARCH_LIMITS
from kernelband.profile.occupancy import theoretical_occupancy


@pytest.mark.parametrize(
    ("cc", "warps", "regs", "smem", "blocks", "pct", "limiter"),
    [
        # 4 warps, 32 regs: 1024 regs/warp -> 16 warps per sub-partition -> 16 blocks; 64/4 = 16.
        (90, 4, 32, 0, 16, 100.0, "warps"),
        # 255 regs -> 8192 regs/warp -> 2 warps per sub-partition -> 8 warps -> 2 blocks.
        (90, 4, 255, 0, 2, 12.5, "registers"),
        # 8 warps, 128 regs -> 4096 regs/warp -> 4 per sub-partition -> 16 warps -> 2 blocks.
        (80, 8, 128, 0, 2, 25.0, "registers"),
        # 100 KiB + 1 KiB reserved per block: 228 KiB / 101 KiB -> 2 blocks of 4 warps.
        (90, 4, 32, 100 * 1024, 2, 12.5, "shared_memory"),
        # sm_89 holds only 48 warps: 4-warp blocks -> 12 blocks -> 100 %.
        (89, 4, 32, 0, 12, 100.0, "warps"),
        # 1 warp per block: the 24-block limit of sm_89 caps it at 24 warps = 50 %.
        (89, 1, 16, 0, 24, 50.0, "blocks"),
        # 40 regs round to 1280 per warp -> 12 warps per sub-partition -> 48 -> 12 blocks of 4.
        (80, 4, 40, 0, 12, 75.0, "registers"),
        # 48 KiB on sm_80: 164 KiB / 49 KiB -> 3 blocks.
        (80, 4, 32, 48 * 1024, 3, 18.75, "shared_memory"),
    ],
)
def test_occupancy_matches_hand_computed_cases(
    cc: int, warps: int, regs: int, smem: int, blocks: int, pct: float, limiter: str
) -> None:
    occ = theoretical_occupancy(ARCH_LIMITS[cc], warps, regs, smem)
    assert (occ.blocks_per_sm, occ.occupancy_pct, occ.limiter) == (blocks, pct, limiter)
    assert occ.warps_per_sm == blocks * warps


def test_kernels_over_a_hard_limit_cannot_be_resident() -> None:
    assert theoretical_occupancy(ARCH_LIMITS[89], 4, 32, 100 * 1024).limiter == "shared_memory_over_block_limit"
    assert theoretical_occupancy(ARCH_LIMITS[90], 64, 32, 0).limiter == "too_many_threads"
    assert theoretical_occupancy(ARCH_LIMITS[80], 4, 300, 0).occupancy_pct == 0.0


def test_every_arch_cites_its_source() -> None:
    for arch in ARCH_LIMITS.values():
        assert "Programming Guide" in arch.source
