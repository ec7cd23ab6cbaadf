"""The `families` and `hard-to-edit` landscapes model what they claim (SIMULATED)."""

from __future__ import annotations

import numpy as np

from kernelband.policy_bench.catalog import SIM_LANDSCAPES
from kernelband.policy_bench.families import N_FAMILIES, FamiliesLandscape, FamilyKernel
from kernelband.policy_bench.roofline import MAX_FAIL_P, RoofKernel

LAND = FamiliesLandscape()


def _kids(parent: FamilyKernel, strategy: str, n: int, seed: int = 0) -> list[FamilyKernel]:
    rng = np.random.default_rng(seed)
    out = [LAND.child(parent, strategy, f"c{i}", rng) for i in range(n)]
    return [c for c in out if isinstance(c, FamilyKernel)]


def test_catalog_lists_the_new_landscapes() -> None:
    assert {"families", "hard-to-edit"} <= set(SIM_LANDSCAPES)


def test_alternative_families_have_lower_floors_and_the_original_is_family_zero() -> None:
    for seed in range(20):
        root = LAND.original(seed)
        assert isinstance(root, FamilyKernel)
        assert root.family == 0 and len(root.families) == N_FAMILIES
        assert root.families[0].floor_ms == root.floor_ms
        assert all(f.floor_ms < root.floor_ms for f in root.families[1:])


def test_only_structural_rewrites_change_family_and_newcomers_start_untuned() -> None:
    root = LAND.original(3)
    assert isinstance(root, FamilyKernel)
    tuning = _kids(root, "reordering", 300) + _kids(root, "pipeline", 300)
    assert {k.family for k in tuning} == {0}
    structural = _kids(root, "tiling", 400, seed=1) + _kids(root, "fusion", 400, seed=2)
    jumped = [k for k in structural if k.family != 0]
    assert 0.2 < len(jumped) / len(structural) < 0.4  # JUMP_P = 0.3 of the correct rewrites
    slower = np.mean([k.true_ms > root.true_ms for k in jumped])
    assert slower > 0.7  # usually slower than the parent at first
    for k in jumped:
        assert k.floor_ms == root.families[k.family].floor_ms < root.floor_ms


def test_families_separate_in_phi() -> None:
    root = LAND.original(5)
    assert isinstance(root, FamilyKernel)
    kids = _kids(root, "tiling", 600, seed=4)
    by_family = {f: np.array([k.phi[1:] for k in kids if k.family == f]) for f in range(N_FAMILIES)}
    centres = [v.mean(axis=0) for v in by_family.values() if len(v)]
    assert len(centres) == N_FAMILIES
    gaps = [np.linalg.norm(a - b) for i, a in enumerate(centres) for b in centres[i + 1:]]
    assert min(gaps) > 5.0  # launch configurations differ between families


def test_hard_to_edit_raises_failure_odds_along_an_optimised_lineage() -> None:
    land = SIM_LANDSCAPES["hard-to-edit"]
    parent = land.original(2)
    assert isinstance(parent, RoofKernel)
    start = parent.fail_p
    rng = np.random.default_rng(0)
    for i in range(300):
        child = land.child(parent, "pipeline", f"c{i}", rng)
        if isinstance(child, RoofKernel):
            if child.true_ms < parent.true_ms:
                assert child.fail_p == min(MAX_FAIL_P, parent.fail_p + 0.1)
                parent = child
            else:
                assert child.fail_p == parent.fail_p
    assert parent.fail_p > start + 0.15
    assert SIM_LANDSCAPES["paper"].original(2).fail_p == start  # the base landscape is unchanged


def test_same_prompt_repeats_a_pairs_first_outcome_class() -> None:
    land = SIM_LANDSCAPES["same-prompt"]
    independent = SIM_LANDSCAPES["paper"]
    agree = {}
    for name, landscape in (("same", land), ("independent", independent)):
        matches = []
        for seed in range(40):
            root = landscape.original(seed)
            assert isinstance(root, RoofKernel)
            rng = np.random.default_rng(seed)
            first = landscape.child(root, "tiling", "a", rng)
            again = landscape.child(root, "tiling", "b", rng)
            matches.append(_cls(root, first) == _cls(root, again))
        agree[name] = np.mean(matches)
    assert agree["same"] > 0.8 > agree["independent"] + 0.2
    # the first answer of every pair is unchanged: the base landscape's odds still hold
    firsts = [land.child(land.original(s), "pipeline", "a", np.random.default_rng(s)) for s in range(200)]
    assert 0.25 < np.mean([c is None for c in firsts]) < 0.6


def _cls(parent: RoofKernel, child: object) -> str:
    if not isinstance(child, RoofKernel):
        return "failed"
    return "faster" if child.true_ms < parent.true_ms else "not faster"
