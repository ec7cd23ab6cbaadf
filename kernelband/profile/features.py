"""KernelBand feature vectors: behaviour phi (5 numbers) and hardware signature h (3 numbers)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from kernelband.profile.static import StaticProfile

PHI_NAMES = ("log1p_time_ms", "registers_per_thread", "smem_per_block_kib", "log2_threads_per_block",
             "occupancy_pct")
H_NAMES = ("sm_pct", "dram_pct", "l2_pct")
# "none": nothing to profile (the PyTorch reference of a KernelBench file has no Triton kernel)
SOURCES = ("ncu", "driver", "static", "estimate", "none")
REFERENCE_NOTE = "the PyTorch reference (placeholder ModelNew): no Triton kernel to profile"


@dataclass(frozen=True)
class Features:
    """phi and h with one source label per value (`ncu`, `driver`, `static` or `estimate`);
    `h_note` says why h is an estimate where Nsight Compute was wanted (or not asked for)."""

    phi: tuple[float, ...]
    phi_sources: tuple[str, ...]
    h: tuple[float, ...]
    h_sources: tuple[str, ...]
    h_note: str = ""

    def __post_init__(self) -> None:
        if len(self.phi) != 5 or len(self.phi_sources) != 5:
            raise ValueError("phi needs 5 values and 5 sources")
        if len(self.h) != 3 or len(self.h_sources) != 3:
            raise ValueError("h needs 3 values and 3 sources")
        unknown = set(self.phi_sources + self.h_sources) - set(SOURCES)
        if unknown:
            raise ValueError(f"unknown feature sources {sorted(unknown)}: use {', '.join(SOURCES)}")

    def named(self) -> dict[str, dict[str, Any]]:
        """Each value with its name and source, for reports."""
        pairs = zip(PHI_NAMES + H_NAMES, self.phi + self.h, self.phi_sources + self.h_sources, strict=True)
        return {name: {"value": value, "source": source} for name, value, source in pairs}

    def to_dict(self) -> dict[str, Any]:
        data = {"phi": list(self.phi), "phi_sources": list(self.phi_sources),
                "h": list(self.h), "h_sources": list(self.h_sources)}
        return {**data, "h_note": self.h_note} if self.h_note else data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Features:
        return cls(tuple(data["phi"]), tuple(data["phi_sources"]), tuple(data["h"]),
                   tuple(data["h_sources"]), str(data.get("h_note") or ""))


def build_features(
    time_ms: float,
    time_source: str,
    static: StaticProfile,
    h: tuple[float, float, float],
    h_source: str,
    registers: int | None = None,
) -> Features:
    """phi from a time and a static profile (registers from the driver when given); h as given."""
    regs = registers if registers is not None else static.registers_per_thread
    phi = (
        math.log1p(max(0.0, time_ms)),
        float(regs),
        static.shared_mem_bytes / 1024.0,
        math.log2(static.threads_per_block),
        static.occupancy.occupancy_pct,
    )
    regs_source = "driver" if registers is not None else "static"
    sources = (time_source, regs_source, "static", "static", "static")
    return Features(phi, sources, tuple(float(v) for v in h), (h_source,) * 3)


def with_time(features: Features, time_ms: float, time_source: str, h_note: str) -> Features:
    """`features` (a static profile's phi and estimated h) with phi's time replaced by a measured one."""
    phi = (math.log1p(max(0.0, time_ms)), *features.phi[1:])
    return replace(features, phi=phi, phi_sources=(time_source, *features.phi_sources[1:]), h_note=h_note)


def reference_features(time_ms: float, time_source: str) -> Features:
    """phi and h of the PyTorch reference: its time, and no Triton kernel to describe."""
    return Features((math.log1p(max(0.0, time_ms)), 0.0, 0.0, 0.0, 0.0),
                    (time_source, "none", "none", "none", "none"), (0.0, 0.0, 0.0),
                    ("none",) * 3, h_note=REFERENCE_NOTE)
