"""The experiments of the policy benchmark; each returns plain numbers for the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernelband.policy_bench.landscapes import Landscape
from kernelband.policy_bench.runner import Summary, paired_gain, run_track, summarise

# label -> (registry name, params); ablations are labelled as such
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "kernelband": ("kernelband", {}),
    "kernelband+prior": ("kernelband+prior", {}),
    "kernelband signatures=representatives": ("kernelband", {"signatures": "representatives"}),
    "ablation: kernelband parent=fastest": ("kernelband", {"parent_rule": "fastest"}),
    "ablation: kernelband parent=fastest K=1": ("kernelband", {"parent_rule": "fastest", "k": 1}),
    "ucb1": ("ucb1", {}),
    "hwucb": ("hwucb", {}),
    "random": ("random", {}),
    "refine": ("refine", {}),
    "bon": ("bon", {}),
}


@dataclass
class LandscapeResult:
    """Speedup curves (seeds x pulls+1) of every variant on one landscape."""

    name: str
    curves: dict[str, np.ndarray] = field(default_factory=dict)

    def at(self, variant: str, budget: int) -> Summary:
        return summarise(self.curves[variant][:, budget])


def run_landscape(landscape: Landscape, seeds: int, budget: int) -> LandscapeResult:
    """Every variant, sequential (P = 1), `seeds` problems, `budget` pulls each.

    Policies do not know the budget, so the T = 20 figures are the first 20 pulls of these runs.
    """
    result = LandscapeResult(landscape.name)
    for label, (name, params) in VARIANTS.items():
        result.curves[label] = np.stack(
            [run_track(name, landscape, seed, budget, params=params) for seed in range(seeds)]
        )
    return result


@dataclass(frozen=True)
class BatchRow:
    """Mean best speedup with P pulls in flight, with and without the pending-pull scheme."""

    policy: str
    pending: int
    virtual: Summary
    ignore: Summary
    gain: Summary


def run_batch(
    landscape: Landscape, seeds: int, budget: int, policies: tuple[str, ...] = ("kernelband", "ucb1"),
    sizes: tuple[int, ...] = (1, 4, 16),
) -> list[BatchRow]:
    """P selections, then P updates, until `budget` pulls; virtual pending pulls vs ignoring them."""
    rows = []
    for policy in policies:
        for p in sizes:
            finals = {}
            for mode in ("virtual", "ignore"):
                finals[mode] = np.array([
                    run_track(policy, landscape, s, budget, batch=p, params={"pending": mode})[-1]
                    for s in range(seeds)
                ])
            rows.append(BatchRow(policy, p, summarise(finals["virtual"]),
                                 summarise(finals["ignore"]),
                                 paired_gain(finals["virtual"], finals["ignore"])))
    return rows
