"""The suite-twice comparison: agreement between runs and each point inside its own interval."""

from __future__ import annotations

from typing import Any

from bench.gpu.suite_twice import agreement, compare, inside, render


def _row(problem: str, point: float | None, low: float | None = None,
         high: float | None = None) -> dict[str, Any]:
    return {"problem": problem, "target": "h200", "policy": "kernelband", "correct": True,
            "speedup": point, "speedup_low": low, "speedup_high": high,
            "speedup_text": "not measured" if point is None else f"{point:.2f}x"}


def test_agreement_is_within_five_percent_or_overlapping_intervals() -> None:
    assert agreement(_row("a", 1.20, 1.1, 1.3), _row("a", 1.24, 1.2, 1.3))["within"] is True
    far = agreement(_row("a", 1.20, 1.15, 1.25), _row("a", 1.40, 1.24, 1.50))
    assert far["within"] is False and far["overlap"] is True and far["agree"] is True
    apart = agreement(_row("a", 1.2, 1.15, 1.25), _row("a", 1.5, 1.4, 1.6))
    assert apart["agree"] is False
    assert agreement(_row("a", None), _row("a", None))["agree"] is None  # nothing to compare
    assert agreement(_row("a", 1.2, 1.1, 1.3), _row("a", None))["agree"] is False


def test_a_point_outside_its_interval_is_reported() -> None:
    assert inside(_row("a", 1.2, 1.1, 1.3)) is True
    assert inside(_row("a", 1.4, 1.1, 1.3)) is False
    assert inside(_row("a", 1.4)) is None  # an estimate or the original: no interval
    rows = compare({"problems": [_row("a", 1.2, 1.1, 1.3), _row("b", 1.4, 1.1, 1.3)]},
                   {"problems": [_row("a", 1.21, 1.1, 1.3), _row("b", 1.4, 1.35, 1.45)]})
    text = render("h200", rows, {})
    assert "1 of 2 problems" not in text and "2 of 2 problems" in text
    assert "outside their own interval: 1 (b)" in text
