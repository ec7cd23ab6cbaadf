"""The paired measurement's stopping rule replayed on recorded A/A rounds: what a looser
`measure_settle_width` would have reported, and how many timed rounds it would have saved.

    python -m bench.gpu.settle_replay [--widths 1.03 1.04 1.05] [RECORD.json ...]

A measurement stops after `min_rounds` once the interval of its rounds so far is at most
`settle_width` wide (high / low), else after `rounds` (kernelband/profile/paired_timing.py). A
record made with width W stopped at the first round where its interval was at most W, so for
any looser width the stop comes at or before it and is fully decided by the recorded rounds:
this replays the judge's own rule (`_settled`) and statistics (`paired_speedup`, with the
between-runner term a GPU measurement adds) on each record's first rounds. Records are the
`paired-aa-*.json` files of bench/gpu/runs (default: all of them), each an original timed
against itself. Nothing is measured here: every figure is **replayed** from recorded rounds,
and a replay cannot say what rounds a measurement would have run past its recorded stop.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.scenarios import RUNS

WITHIN = 0.03  # an A/A point within 3% of 1.00 (bench/gpu/paired_aa.py)
WIDTHS = (1.03, 1.04, 1.05, 1.07)


@dataclass(frozen=True)
class Replayed:
    """One record at one width: where it stops and what it reports there."""

    record: str
    problem: str
    cases: int
    width: float
    rounds: int  # rounds the rule keeps at this width
    recorded: int  # rounds the record ran
    point: float
    low: float
    high: float

    @property
    def contains_one(self) -> bool:
        return self.low <= 1.0 <= self.high

    @property
    def within(self) -> bool:
        return abs(self.point - 1.0) <= WITHIN


def replay(original_ms: list[float], candidate_ms: list[float], width: float) -> tuple[int, Any]:
    """(rounds kept, the reported PairedSpeedup) under the judge's rule at `width`."""
    from kernelband.profile.paired import paired_speedup
    from kernelband.profile.paired_runners import PairedConfig
    from kernelband.profile.paired_timing import PairedRun, _settled

    config = replace(PairedConfig(), settle_width=width)
    run = PairedRun(cases=[], batch={})
    for n in range(1, len(original_ms) + 1):
        run.original_ms, run.candidate_ms = original_ms[:n], candidate_ms[:n]
        if _settled(run, config) or n == len(original_ms):
            break
    reported = paired_speedup(run.original_ms, run.candidate_ms, method="replayed",
                              runner_sd=config.runner_sd, runner_share=config.runner_share)
    return len(run.original_ms), reported


def replay_record(path: Path, widths: tuple[float, ...]) -> list[Replayed]:
    """Every problem of one A/A record with its rounds, at each width."""
    rows = []
    for entry in json.loads(path.read_text()):
        rounds = entry.get("round_ms") or {}
        original, candidate = rounds.get("original") or [], rounds.get("candidate") or []
        if len(original) < 2 or len(original) != len(candidate):
            continue  # failed, or recorded before the rounds were kept
        for width in widths:
            kept, speedup = replay(original, candidate, width)
            rows.append(Replayed(str(path.relative_to(RUNS) if path.is_relative_to(RUNS) else path),
                                 str(entry.get("problem")), len(entry.get("batch") or {}), width, kept,
                                 len(original), speedup.point, speedup.low, speedup.high))
    return rows


def table(rows: list[Replayed], widths: tuple[float, ...]) -> str:
    """Per number of timed cases and width: contains 1.00, within 3%, rounds kept."""
    lines = ["| timed cases | settle width | A/A measurements | interval contains 1.00 | point within 3% "
             "| median width | rounds kept (median, mean) | rounds saved against the records |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for cases in sorted({r.cases for r in rows}):
        for width in widths:
            group = [r for r in rows if r.cases == cases and r.width == width]
            if not group:
                continue
            kept = [r.rounds for r in group]
            saved = sum(r.recorded - r.rounds for r in group) / max(1, sum(r.recorded for r in group))
            lines.append(f"| {cases} | {width:.2f} | {len(group)} | {sum(r.contains_one for r in group)} "
                         f"| {sum(r.within for r in group)} | {statistics.median(r.high / r.low for r in group):.3f} "
                         f"| {statistics.median(kept):.0f}, {statistics.fmean(kept):.1f} | {saved:.0%} |")
    return "\n".join(lines)


def misses(rows: list[Replayed]) -> str:
    """The replayed measurements that would fail the A/A, one line each."""
    bad = [r for r in rows if not (r.contains_one and r.within)]
    return "\n".join(f"- {r.record} {r.problem} ({r.cases} cases) at {r.width:.2f}: {r.point:.3f} "
                     f"[{r.low:.3f}, {r.high:.3f}] after {r.rounds} of {r.recorded} rounds" for r in bad)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu.settle_replay", description=__doc__.split("\n")[0])
    parser.add_argument("records", nargs="*", type=Path, help="paired-aa-*.json files (default: every one under bench/gpu/runs)")
    parser.add_argument("--widths", nargs="+", type=float, default=list(WIDTHS))
    args = parser.parse_args(argv)
    records = args.records or sorted(RUNS.rglob("paired-aa-*.json"))
    widths = tuple(args.widths)
    rows = [row for path in records for row in replay_record(path, widths)]
    if not rows:
        print("no A/A record with recorded rounds among: " + ", ".join(map(str, records)), file=sys.stderr)
        return 1
    print(f"REPLAYED from the recorded rounds of {len(records)} A/A records (nothing measured here)\n")
    print(table(rows, widths))
    failed = misses(rows)
    print("\nWould fail the A/A (interval without 1.00 or point off by more than 3%):\n" + (failed or "- none"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
