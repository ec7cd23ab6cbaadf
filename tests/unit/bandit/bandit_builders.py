"""Builders shared by the bandit tests."""

from __future__ import annotations

import numpy as np

from kernelband.bandit import FrontierEntry


def entry(kernel_id: str, time_ms: float, h: tuple[float, float, float] | None = (40.0, 40.0, 40.0),
          phi: tuple[float, ...] | None = None) -> FrontierEntry:
    """A frontier entry with a phi derived from its time unless given."""
    return FrontierEntry(kernel_id, time_ms, phi if phi is not None else (np.log1p(time_ms), 32, 16, 7, 50), h)


def random_child(rng: np.random.Generator, parent_time: float, index: int) -> FrontierEntry | None:
    """A simulated child: 40% fail, others are 20% faster to 10% slower with random profile."""
    if rng.random() < 0.4:
        return None
    time_ms = parent_time * float(rng.uniform(0.8, 1.1))
    phi = tuple(float(v) for v in rng.normal(size=5))
    h = (float(rng.uniform(0, 100)), float(rng.uniform(0, 100)), float(rng.uniform(0, 100)))
    return FrontierEntry(f"k{index}", time_ms, phi, h)
