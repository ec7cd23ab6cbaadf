"""The stopping rule replayed on recorded rounds: the judge's own rule and statistics, a looser
width never keeping more rounds than the record ran, and records without rounds left out."""

from __future__ import annotations

import json
import random
from pathlib import Path

from bench.gpu import settle_replay


def _rounds(n: int, noise: float, seed: int) -> tuple[list[float], list[float]]:
    rng = random.Random(seed)
    original = [1.0 + rng.gauss(0, noise) for _ in range(n)]
    return original, [o * (1.0 + rng.gauss(0, noise)) for o in original]


def test_a_looser_width_stops_no_later_and_never_before_min_rounds() -> None:
    original, candidate = _rounds(20, 0.02, seed=1)
    kept = [settle_replay.replay(original, candidate, width)[0] for width in (1.03, 1.05, 1.10, 1.50)]
    assert kept == sorted(kept, reverse=True)
    assert kept[-1] == 8  # min_rounds of the default PairedConfig
    assert all(k <= 20 for k in kept)


def test_quiet_rounds_stop_at_min_rounds_and_report_a_narrow_interval_around_one() -> None:
    original, candidate = _rounds(20, 0.001, seed=2)
    kept, speedup = settle_replay.replay(original, candidate, 1.03)
    assert kept == 8 and speedup.low <= 1.0 <= speedup.high and speedup.high / speedup.low < 1.03


def test_records_without_rounds_are_left_out_and_the_table_counts_the_rest(tmp_path: Path) -> None:
    original, candidate = _rounds(12, 0.01, seed=3)
    record = tmp_path / "paired-aa-h200.json"
    record.write_text(json.dumps([
        {"problem": "a", "batch": {"c0": 1, "c1": 1}, "round_ms": {"original": original, "candidate": candidate}},
        {"problem": "failed", "batch": {}, "round_ms": {}},
    ]))
    rows = settle_replay.replay_record(record, (1.03, 1.05))
    assert [(r.problem, r.cases, r.width, r.recorded) for r in rows] == [("a", 2, 1.03, 12), ("a", 2, 1.05, 12)]
    text = settle_replay.table(rows, (1.03, 1.05))
    assert "| 2 | 1.03 | 1 |" in text and "| 2 | 1.05 | 1 |" in text
    assert settle_replay.main([str(record)]) == 0
