"""The roofline `paper` landscape has the structure the KernelBand paper assumes (SIMULATED)."""

from __future__ import annotations

import numpy as np

from kernelband.policy_bench.catalog import SIM_LANDSCAPES
from kernelband.policy_bench.roofline import KINDS, RoofKernel, RooflineLandscape, help_probability

LAND = RooflineLandscape()


def _children(parent: RoofKernel, strategy: str, n: int, seed: int = 0) -> list[RoofKernel]:
    rng = np.random.default_rng(seed)
    out = [LAND.child(parent, strategy, f"c{i}", rng) for i in range(n)]
    return [c for c in out if isinstance(c, RoofKernel)]


def test_catalog_keeps_the_v0_landscape_for_comparison() -> None:
    assert {"paper", "paper-v0", "no-structure", "uniform"} <= set(SIM_LANDSCAPES)
    assert isinstance(SIM_LANDSCAPES["paper"], RooflineLandscape)


def test_attacking_one_dimension_saturates_it_with_diminishing_returns() -> None:
    parent = next(k for k in map(LAND.original, range(50)) if k.h[2] < 50)  # L2 has headroom
    assert isinstance(parent, RoofKernel)
    rng = np.random.default_rng(1)
    gains, l2 = [], [parent.h[2]]
    for i in range(40):  # keep the fastest correct tiling child, like an always-refine loop
        child = LAND.child(parent, "tiling", f"c{i}", rng)
        if isinstance(child, RoofKernel) and child.true_ms < parent.true_ms:
            gains.append(parent.waste[2] - child.waste[2])
            parent = child
            l2.append(parent.h[2])
    assert len(gains) >= 3  # few wins: L2 saturates, so later tiling rewrites rarely help
    assert l2[-1] > l2[0] + 15  # L2 throughput rises toward saturation
    assert gains[-1] < 0.75 * gains[0]  # each win removes less of the L2 waste


def test_never_faster_than_the_floor() -> None:
    root = LAND.original(4)
    assert isinstance(root, RoofKernel)
    kids = _children(root, "pipeline", 200) + _children(root, "fusion", 200)
    assert all(k.true_ms > root.floor_ms for k in kids)
    assert all(k.floor_ms == root.floor_ms for k in kids)


def test_unsaturated_dimensions_help_more_often() -> None:
    assert help_probability(0.3) > 0.75 > 0.25 > help_probability(0.02)
    wins: dict[bool, list[bool]] = {True: [], False: []}  # keyed by: strategy aimed at the saturated dimension
    for seed in range(30):
        root = LAND.original(seed)
        assert isinstance(root, RoofKernel)
        saturated = int(np.argmax(root.h))
        for strategy, dim in (("pipeline", 0), ("fusion", 1), ("tiling", 2)):
            kids = _children(root, strategy, 20, seed)
            wins[dim == saturated] += [k.true_ms < root.true_ms for k in kids]
    assert np.mean(wins[False]) > np.mean(wins[True]) + 0.2


def test_kernel_kinds_separate_in_phi() -> None:
    by_kind: dict[float, list[tuple[float, ...]]] = {}
    for seed in range(30):
        root = LAND.original(seed)
        by_kind.setdefault(round(root.phi[1] / 30), []).append(root.phi)
    assert len(KINDS) == 3 and len(by_kind) >= 3  # register counts fall into kind groups


def test_no_structure_hides_h() -> None:
    land = SIM_LANDSCAPES["no-structure"]
    hs = np.array([land.original(s).h for s in range(40)])
    assert hs.std(axis=0).min() > 15  # uniform noise, not a saturation pattern


def test_latency_reports_wall_and_cpu_time() -> None:
    from kernelband.policy_bench.latency import time_select

    ms = time_select("kernelband", size=60, repeats=12)
    assert {"select_p95_ms", "select_cpu_p95_ms", "update_max_ms"} <= set(ms)
    assert all(v >= 0 for v in ms.values()) and ms["select_median_ms"] < 50
