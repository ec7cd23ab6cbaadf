"""The policy benchmark's simulator, replay tables and report section behave as documented."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kernelband.policy_bench.catalog import SIM_LANDSCAPES
from kernelband.policy_bench.replay import ReplayFormatError, ReplayLandscape, load_replay
from kernelband.policy_bench.runner import run_track, summarise


def test_paper_landscape_fails_often_and_punishes_saturated_dimensions() -> None:
    land = SIM_LANDSCAPES["paper"]
    rng = np.random.default_rng(0)
    fails = 0
    gains: dict[int, list[float]] = {0: [], 1: []}
    for seed in range(20):
        root = land.original(seed)
        saturated = int(np.argmax(root.h))
        for strategy, dim in (("pipeline", 0), ("fusion", 1), ("tiling", 2)):
            child = land.child(root, strategy, "c", rng)
            if child is None:
                fails += 1
            else:
                gains[int(dim == saturated)].append(1 - child.true_ms / root.true_ms)
    assert 0.25 < fails / 60 < 0.55
    assert np.mean(gains[0]) > np.mean(gains[1]) + 0.03


def test_tracks_are_reproducible_and_start_at_one() -> None:
    land = SIM_LANDSCAPES["paper"]
    a = run_track("kernelband", land, 3, 12)
    b = run_track("kernelband", land, 3, 12)
    assert len(a) == 13 and a[0] == 1.0 and np.array_equal(a, b)
    assert np.all(np.isfinite(a)) and a.max() > 1.0


def test_batch_and_reversed_results_complete_the_budget() -> None:
    curve = run_track("ucb1", SIM_LANDSCAPES["uniform"], 1, 10, batch=4, reverse=True)
    assert len(curve) == 11


def test_summary_ci_shrinks_with_more_seeds() -> None:
    rng = np.random.default_rng(0)
    small, large = summarise(rng.normal(1.5, 0.2, 10)), summarise(rng.normal(1.5, 0.2, 100))
    assert large.ci95 < small.ci95 and 0.0 <= small.fast1 <= 1.0


EXAMPLE = Path(__file__).resolve().parents[3] / "bench" / "replay" / "example_simulated.json"


def test_the_example_replay_table_replays() -> None:
    problems, simulated = load_replay(EXAMPLE)
    assert simulated and problems[0].transitions
    land = ReplayLandscape(problems)
    curve = run_track("random", land, 0, 8)
    assert len(curve) == 9 and curve.min() >= 1.0 - 1e-12


def test_replay_format_errors_name_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"format": "other"}))
    with pytest.raises(ReplayFormatError, match="'format' must be"):
        load_replay(path)
