"""Rank statistics and the Markdown tables of bench/gpu/RESULTS.md (no GPU needed)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

NOT_RUN = "not run"


def ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties sharing their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rho (Pearson on average ranks); None below 3 points or with no spread."""
    if len(xs) != len(ys):
        raise ValueError("spearman needs two lists of the same length")
    if len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / (sxx * syy) ** 0.5


def fmt(value: Any, digits: int = 4) -> str:
    """A table cell: numbers rounded, None as a dash."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def table(header: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def timing_rows(examples: list[dict[str, Any]]) -> list[list[Any]]:
    """One row per (example, case): ours vs do_bench, CV, A/A paired ratio."""
    rows = []
    for ex in examples:
        for t in ex.get("timing") or []:
            if "error" in t:
                rows.append([ex["example"], "-", "error: " + t["error"][:80], *["-"] * 6])
                continue
            rows.append([ex["example"], t["case"], t["ours_ms"] * 1e3, t["ours_again_ms"] * 1e3,
                         t["do_bench_ms"] * 1e3, t["ratio_vs_do_bench"],
                         abs(t["ratio_vs_do_bench"] - 1) <= 0.03, t["cv"], t["aa_paired_ratio"]])
    return rows


def correctness_rows(examples: list[dict[str, Any]]) -> list[list[Any]]:
    """One row per example: the evaluator's verdict on the original kernel."""
    rows = []
    for ex in examples:
        c = ex.get("correctness") or {}
        rows.append([ex["example"], c.get("correct"), c.get("reason") or c.get("error"),
                     c.get("cases_checked"), c.get("held_out_checked"), c.get("wall_s")])
    return rows


def static_rows(examples: list[dict[str, Any]]) -> list[list[Any]]:
    """One row per launch: static registers/shared vs the loaded kernel's."""
    rows = []
    for ex in examples:
        static = ex.get("static")
        if isinstance(static, dict):  # the step failed as a whole
            rows.append([ex["example"], "error: " + static.get("error", "")[:80], *["-"] * 6])
            continue
        for r in static or []:
            rows.append([ex["example"], f'{r["kernel"]} ({r.get("case")})', r.get("static_regs", r.get("static_error", "-")),
                         r["driver_regs"], r.get("static_shared"), r["driver_shared"],
                         r["regs_match"], r["shared_match"]])
    return rows


def ncu_rows(ncu: list[dict[str, Any]]) -> list[list[Any]]:
    """One row per example: h of its longest kernel, or why ncu gave nothing."""
    rows = []
    for row in ncu:
        h = row.get("h") or {}
        if not row.get("ok"):
            rows.append([row["example"], "no: " + str(row.get("reason", ""))[:100], *["-"] * 5])
            continue
        rows.append([row["example"], h.get("kernel"), h.get("sm_pct"), h.get("dram_pct"),
                     h.get("l2_pct"), (h.get("time_ms") or 0) * 1e3, len(row["kernels"])])
    return rows


def optimize_rows(jobs: list[dict[str, Any]]) -> list[list[Any]]:
    """One row per (example, policy) job."""
    rows = []
    for j in jobs:
        if j.get("status") in (NOT_RUN, "error"):
            rows.append([j["example"], j["policy"], j["status"], str(j.get("reason"))[:100],
                         *["-"] * 7])
            continue
        rows.append([j["example"], j["policy"], j["status"], j.get("iterations_done"),
                     j.get("original_ms", 0) and j["original_ms"] * 1e3,
                     j.get("best_ms") and j["best_ms"] * 1e3, j.get("best_speedup"), j.get("label"),
                     j.get("held_out"), " > ".join(j.get("lineage") or []) or "original",
                     Path(str(j.get("run", "-"))).name])
    return rows
