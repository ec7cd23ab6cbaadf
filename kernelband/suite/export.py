"""Suite report as CSV (one row per problem, target and policy) or JSON (the whole report)."""

from __future__ import annotations

import csv
import io
import json

from kernelband.suite.model import SuiteReport

# speedup: the paired point (measured; its 95% interval beside it) or the labelled estimate;
# empty where no paired measurement exists. fast counts the interval's low, fast_point the point.
PROBLEM_COLUMNS = ("problem", "target", "policy", "job_id", "status", "correct", "fast",
                   "speedup", "speedup_low", "speedup_high", "significant", "speedup_text",
                   "speedup_method", "fast_point", "original_ms", "best_ms", "label", "method",
                   "case_ms", "held_out", "reason")
METRIC_COLUMNS = ("target", "policy", "problems", "finished", "correct_pct", "fast1_pct",
                  "fast1_point_pct", "geomean_speedup_correct", "geomean_speedup_all", "label",
                  "fast_0_pct", "fast_1_pct", "fast_1.5_pct", "fast_2_pct")


def to_json(report: SuiteReport) -> str:
    """The full report (settings, metrics, per-problem rows, load failures) as JSON."""
    return json.dumps(report.to_dict(), indent=2, sort_keys=False)


def to_csv(report: SuiteReport) -> str:
    """Per-problem rows, then failed-to-load rows (status `load_failed`) with their reason."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(PROBLEM_COLUMNS), extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for row in report.problems:
        writer.writerow({**row.to_dict(), "case_ms": _case_ms(row.original_case_ms, row.best_case_ms)})
    for failure in report.load_failures:
        for target in report.settings.targets:
            for policy in report.settings.policies:
                writer.writerow({"problem": failure.name, "target": target, "policy": policy,
                                 "status": "load_failed", "correct": False, "fast": False,
                                 "reason": failure.reason})
    return buffer.getvalue()


def _case_ms(original: dict[str, float], best: dict[str, float]) -> str:
    """`case=original->best` per case, in one CSV cell (ms)."""
    names = list(dict.fromkeys([*original, *best]))
    return "; ".join(f"{n}={_ms(original.get(n))}->{_ms(best.get(n))}" for n in names)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def metrics_csv(report: SuiteReport) -> str:
    """The suite metrics table (one row per target and policy) as CSV."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(METRIC_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for metric in report.metrics:
        row = {k: v for k, v in metric.to_dict().items() if k != "fast_p"}
        writer.writerow(row | {f"fast_{p}_pct": pct for p, pct in metric.fast_p.items()})
    return buffer.getvalue()
