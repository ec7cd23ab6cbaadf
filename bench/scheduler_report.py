"""The scheduler throughput benchmark's page: its targets, its section of bench/RESULTS.md and
its plot, from the data `bench.scheduler_throughput` measured."""

from __future__ import annotations

from typing import Any

from bench.common import fmt, markdown_table, new_figure, save_figure, verdict
from bench.scheduler_stats import (
    FLAT_SHARE,
    FLAT_WINDOW_S,
    HOTSPOTS,
    WARMUP_STEPS,
    WINDOW_S,
    trim_listing,
)
from kernelband.config import Settings

TARGET_PULLS_PER_S, TARGET_P99_MS = 600.0, 50.0


def targets(data: dict[str, Any]) -> list[tuple[str, bool | None, str]]:
    """At 100 jobs x 1,000 candidates: >= 600 pulls/s, the last 10 s window >= 90% of the
    first (a pass costs the same late in a run as early), select+dispatch p99 <= 50 ms."""
    row = next((r for r in data["rows"] if r["jobs"] == 100 and r["frontier"] == 1000), None)
    if row is None:
        return [("100 jobs x 1,000 candidates", None, "not run (quick mode)")]
    rate, p99 = row["pulls_per_s"], row["select_p99_ms"]
    windows = ", ".join(fmt(w) for w in row.get("window_pulls_per_s") or [])
    result = [(f">= {TARGET_PULLS_PER_S:g} pulls/s sustained", rate >= TARGET_PULLS_PER_S,
               f"{fmt(rate)} pulls/s over {fmt(row['wall_s'])} s "
               f"({100 * rate / TARGET_PULLS_PER_S:.0f}% of target; per {WINDOW_S:g} s window: "
               f"{windows or '-'}{_cpu_note(row)})")]
    flat = row.get("flat_window_pulls_per_s") or []
    if len(flat) >= 2:
        share = flat[-1] / flat[0] if flat[0] else float("nan")
        result.append((f"last {FLAT_WINDOW_S:g} s window >= {100 * FLAT_SHARE:.0f}% of the first",
                       share >= FLAT_SHARE,
                       f"{fmt(flat[-1])} / {fmt(flat[0])} pulls/s = {100 * share:.1f}%"))
    code = row.get("cpu_per_pull_in_references") or []
    if len(code) >= 2:  # the same check on a figure of the code: CPU per pull / reference loop
        growth = code[-1] / code[0]
        result.append((f"CPU per pull in reference loops, last {FLAT_WINDOW_S:g} s window <= "
                       f"first / {FLAT_SHARE:g}", growth <= 1 / FLAT_SHARE,
                       ", ".join(f"{c:.3f}" for c in code) + f" per window: last / first "
                       f"{100 * growth:.1f}% (reference loop per window: " + ", ".join(
                           f"{ms:.1f}" for ms in row["reference_ms_windows"]) + " ms)"))
    result.append(("select+dispatch p99 <= 50 ms", p99 <= TARGET_P99_MS, f"p99 {fmt(p99)} ms"))
    return result


def _cpu_note(row: dict[str, Any]) -> str:
    cpu = row.get("cpu_ms_per_pull_windows") or []
    backends = row.get("postgres_cpu_ms_per_pull_windows") or []
    return ((f"; scheduler CPU per pull per {FLAT_WINDOW_S:g} s window: "
             + ", ".join(f"{ms:.2f}" for ms in cpu) + " ms") if cpu else "") + (
        ("; Postgres: " + ", ".join(f"{ms:.2f}" for ms in backends) + " ms") if backends else "")


def largest_row(data: dict[str, Any]) -> dict[str, Any]:
    """The row of the largest configuration run ({} when none)."""
    rows = data.get("rows") or []
    return max(rows, key=lambda r: (r["jobs"], r["frontier"])) if rows else {}


def section(data: dict[str, Any]) -> str:
    """The RESULTS.md section: method, table, targets, profile and plot."""
    rows = [(r["jobs"], r["frontier"], fmt(r["pulls_per_s"]), fmt(r["select_cycles_per_s"]),
             fmt(r["select_p50_ms"]), fmt(r["select_p99_ms"]), fmt(r["select_ms_per_pull"]),
             r.get("results_applied", "-"), fmt(r.get("ingest_ms_per_result", float("nan")), 2),
             fmt(r["ingest_p99_ms"]))
            for r in data["rows"]]
    table = markdown_table(("jobs", "frontier", "pulls/s overall", "select+dispatch cycles/s",
                            "p50 ms", "p99 ms", "ms per pull", "results applied",
                            "ingest ms per result", "ingest batch p99 ms"), rows)
    lines = [f"- {name}: **{'not evaluated' if met is None else verdict(met)}** ({why})"
             for name, met, why in targets(data)]
    lines.append("\nResults are applied in batches: one fenced transaction, one locking read of "
                 "every attempt with its rows, the children inserted in one statement, and "
                 "frontier rows, arm/cluster views and job versions written once per "
                 "transaction, so a batch costs the same statements whatever its size. A pass "
                 "reads 3 times to select; new attempts go in claimed (one INSERT), read their "
                 "candidates and measurements for payloads (the columns of jobs, problems "
                 "and tracks that never change once set are read once per job), whatever the "
                 "number of pulls; the changed tracks, attempts and "
                 "candidates of a flush go out one UPDATE per table and column set, and new "
                 "events, attempts, measurements and usage rows one INSERT per table, their "
                 "rows one JSON parameter. tests/unit/scheduling/test_pipeline_throughput.py "
                 "counts them.")
    shares = data.get("hotspots") or {}
    where = "; ".join(f"{100 * share:.0f}% {HOTSPOTS[name]} (`{name}`)"
                      for name, share in sorted(shares.items(), key=lambda kv: -kv[1]))
    profile = (f"\n\nWhere the time goes at the largest configuration (cProfile, cumulative "
               f"share of profiled time; shares overlap because calls nest): {where}."
               if where else "")
    profile += (f"\n\ncProfile of scheduler passes at the largest configuration (cumulative "
               f"time, top entries):\n\n```\n{trim_listing(data['profile'])}\n```"
               if data.get("profile") else "")
    machine = (f"\n\n{data['machine']} Load average at the end: {data['load_at_end']}; "
               "the largest configuration ran from load "
               f"{largest_row(data).get('load_before', '-')} to "
               f"{largest_row(data).get('load_after', '-')}. This machine's cores are shared "
               "with other work, so rates move with its load and with the reference loop's "
               "speed." if data.get("machine") else "")
    return ("## Scheduler throughput\n\n"
            f"**{data['label']}.** Command: `python -m bench.scheduler_throughput`. Postgres "
            "(fresh database per configuration); each job has one `cpu` track, parallelism 2, "
            "and a kernelband policy state seeded with N frontier entries (k-means clustered); "
            "all jobs belong to one team whose fair-share cap is lifted (the default 32 "
            "attempts in flight per team would be the limit, not the scheduler). A pull takes "
            "three results (generate, compile, profile). A select+dispatch cycle is one "
            "`select_and_dispatch` call (one fenced transaction that records new pulls, their "
            "attempts inserted claimed, sent once it commits; a bounded pass over the jobs with free "
            f"capacity: at most {Settings().max_pulls_per_pass} new pulls, choosing pulls for at most "
            f"{Settings().select_budget_ms:g} ms of the scheduler's CPU time as the leader does, "
            f"and {Settings().max_dispatch_per_pass} sends, the defaults); an ingest "
            "cycle is one `ingest_batch` call (every result since the last pass; the attempts "
            "they lead to go out once it commits). "
            f"{WARMUP_STEPS} untimed passes, then {data['seconds_per_config']:g} s of scheduler "
            f"passes per configuration ({data.get('sustained_s') or data['seconds_per_config']:g} s "
            f"at the largest, the sustained rate).{machine}\n\n{table}\n\n" + "\n".join(lines)
            + comparison(data) + profile
            + "\n\n![scheduler throughput](results/scheduler_throughput.png)")


def comparison(data: dict[str, Any]) -> str:
    """The before/after runs of the sustained configuration, taken in turn ('' when none)."""
    compared = data.get("comparison")
    if not compared:
        return ""
    rows = []
    for run in compared["runs"]:
        flat = run.get("flat_window_pulls_per_s") or []
        cpu, code = run.get("cpu_ms_per_pull_windows"), run.get("cpu_per_pull_in_references")
        in_refs = f" ({sum(code) / len(code):.3f})" if code else ""
        rows.append((run["round"], f"{run['tree']} ({compared['against']})"
                     if run["tree"] == "before" else "after (this commit)",
                     fmt(run["pulls_per_s"]), fmt(run["select_p99_ms"]),
                     f"{100 * flat[-1] / flat[0]:.1f}%" if len(flat) >= 2 and flat[0] else "-",
                     f"{sum(cpu) / len(cpu):.2f}{in_refs}" if cpu else "-",
                     f"{run.get('load_before', '-')} -> {run.get('load_after', '-')}"))
    table = markdown_table(("round", "code", "pulls/s", "select+dispatch p99 ms",
                            "last / first 10 s", "scheduler CPU ms per pull (in reference loops)",
                            "load average (1/5/15 min)"), rows)
    return ("\n\nBefore and after, taken in turn on this machine (the 100 x 1,000 "
            f"configuration for {fmt(data.get('sustained_s') or 0)} s each; `--against "
            f"{compared['against']}` runs that commit's own benchmark from a clean export):"
            f"\n\n{table}")


def plot(data: dict[str, Any]) -> None:
    """Pulls per second and select+dispatch p99 against frontier size, one line per job count."""
    fig, axes = new_figure(2)
    for jobs in sorted({r["jobs"] for r in data["rows"]}):
        rows = [r for r in data["rows"] if r["jobs"] == jobs]
        sizes = [r["frontier"] for r in rows]
        axes[0].plot(sizes, [r["pulls_per_s"] for r in rows], "o-", label=f"{jobs} jobs")
        axes[1].plot(sizes, [r["select_p99_ms"] for r in rows], "o-", label=f"{jobs} jobs")
    axes[0].axhline(TARGET_PULLS_PER_S, ls="--", c="grey", label="target")
    axes[1].axhline(TARGET_P99_MS, ls="--", c="grey", label="target")
    axes[0].set(xscale="log", yscale="log", xlabel="frontier size", ylabel="pulls/s",
                title="pulls per second (simulated task results)")
    axes[1].set(xscale="log", yscale="log", xlabel="frontier size", ylabel="ms",
                title="select+dispatch p99")
    for ax in axes:
        ax.legend()
    save_figure(fig, "scheduler_throughput.png")
