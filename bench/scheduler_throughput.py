"""Scheduler throughput: select+dispatch and ingest cycles per second on Postgres.

Active jobs (1, 10, 100) each have one track whose policy state holds a frontier of N candidates
(10, 100, 1,000). The real engine step functions run against the database; the dispatcher
completes every task instantly with SIMULATED task results (no LLM, compiler or GPU runs), so
what is timed is the scheduler's own work: policy select/update, clustering, SQL, JSON state.

Cycle definitions: a select+dispatch cycle is one `select_and_dispatch` call (one bounded pass
over the jobs with free capacity, committing at most `max_pulls_per_pass` new pulls, choosing
pulls for at most `select_budget_ms` of its own CPU time as the leader does, and sending at most
`max_dispatch_per_pass` pending attempts, the Settings defaults); an ingest cycle
is one `ingest_batch` call (every result that arrived since the last pass, applied in batches of
up to 500 per transaction). Pulls/s counts new pulls selected per second of wall time after
WARMUP_STEPS untimed passes (the first pass parses every policy state from the database).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import insert
from sqlalchemy.orm import Session, sessionmaker

from bench.common import (
    RESULTS_DIR,
    ROOT,
    fresh_postgres,
    load_average,
    machine_line,
    percentile_ms,
    python_reference_ms,
    write_section,
)
from bench.scheduler_report import largest_row, plot, section, targets
from bench.scheduler_stats import (
    FLAT_WINDOW_S,
    REFERENCE_ADDITIONS,
    REFERENCE_EVERY_S,
    SUSTAINED_S,
    WARMUP_STEPS,
    cpu_in_references,
    hotspots,
    window_rates,
)
from bench.scheduler_throughput_cpu import cpu_note, postgres_cpu_s, used_between
from bench.sim_tasks import SIM_TASKS, SIMULATED, sim_profile
from kernelband.bandit import FrontierEntry, make_policy
from kernelband.bandit.clustering import recluster
from kernelband.config import Settings
from kernelband.db import repository
from kernelband.db.models import Candidate, Track
from kernelband.db.session import make_engine, make_session_factory, session_scope
from kernelband.scheduling.collector import PassCollector
from kernelband.scheduling.dispatch import InlineDispatcher
from kernelband.scheduling.lifecycle import finish_tracks_and_jobs, start_queued_jobs
from kernelband.scheduling.pipeline import (
    LEADER_ENGINE_OPTIONS,
    EngineContext,
    dispatch_pending,
    fenced,
    ingest_batch,
    ingest_safely,
    select_and_dispatch,
)
from kernelband.scheduling.state import load_state, save_state

BIG_BUDGET = 1000  # the API maximum; more than any benchmark run dispatches


# Every benchmark job belongs to one team; the default fair-share cap (32 attempts in flight
# per team) would make the cap, not the scheduler, the limit. Lifted: every slot is used.
TEAM_CAP = 100_000


def make_context(factory: sessionmaker[Session]) -> EngineContext:
    """An engine context whose dispatcher answers with simulated results; its passes are
    bounded and its policy states kept hot as the leader's are (services/scheduler/loop.py:
    `leader_context`)."""
    settings = Settings(max_in_flight_per_team=TEAM_CAP)
    return EngineContext(factory, InlineDispatcher(SIM_TASKS, record=False), settings,
                         select_budget_s=settings.select_budget_ms / 1000,
                         state_writeback_s=settings.state_writeback_s)


def seed_jobs(ctx: EngineContext, jobs: int, frontier: int, parallelism: int = 2) -> list[int]:
    """`jobs` running jobs, each with one track whose policy frontier holds `frontier` entries."""
    with session_scope(ctx.factory) as session:
        team = repository.get_or_create_team(session, "bench-team")
        problem = repository.get_or_create_problem(
            session, team.id, "bench", "native", "ORIGINAL", {"editable": "ORIGINAL"}, "b" * 64)
        ids = [repository.create_job(session, team.id, problem.id, ("cpu",), seed=i,
                                     budget_iterations=BIG_BUDGET, parallelism=parallelism).id
               for i in range(jobs)]
    with fenced(ctx) as session:
        start_queued_jobs(session)  # one track per job, each with a baseline attempt
    dispatch_pending(ctx)  # the inline dispatcher answers the baselines at once
    for item in ctx.dispatcher.drain():
        ingest_safely(ctx, item.attempt_id, item.result)
    for job_id in ids:
        _grow_frontier(ctx.factory, job_id, frontier)
    return ids


def _grow_frontier(factory: sessionmaker[Session], job_id: int, size: int) -> None:
    """Insert size-1 measured candidates and put them in the track's policy state."""
    policy = make_policy("kernelband", {})
    with session_scope(factory) as session:
        track = session.query(Track).filter(Track.job_id == job_id).one()
        rows = [{"track_id": track.id, "parent_id": track.original_candidate_id,
                 "editable": f"ORIGINAL\n# seeded {i}", "status": "measured", "lineage_depth": 1}
                for i in range(size - 1)]
        ids = list(session.scalars(insert(Candidate).returning(Candidate.id), rows)) if rows else []
        state = load_state(track)
        for cid in ids:
            sim = sim_profile({"editable": f"seeded {cid}", "target": "cpu"})
            state.frontier.append(FrontierEntry(str(cid), sim["measurement"]["time_ms"],
                                                tuple(sim["features"]["phi"]),
                                                tuple(sim["features"]["h"])))
            state.labels.append(0)
        cfg = policy.cfg  # type: ignore[attr-defined]
        if len(state.frontier) >= 2 * cfg.k:
            recluster(state, cfg.k, cfg.kmeans_n_init, np.random.default_rng(job_id))
        state.since_recluster = 0
        save_state(session, track, state)


@dataclass
class Timings:
    """Per-call durations (seconds) of one configuration."""

    select: list[float] = field(default_factory=list)
    ingest: list[float] = field(default_factory=list)
    finish: list[float] = field(default_factory=list)
    pulls: int = 0
    results: int = 0
    wall_s: float = 0.0
    marks: list[tuple[float, int]] = field(default_factory=list)  # (seconds in, pulls so far)
    # (pulls so far, this process's CPU seconds so far, the reference loop's CPU excluded): CPU
    # per pull is what a busy machine changes least (other processes lengthen the wall time)
    cpu_marks: list[tuple[int, float]] = field(default_factory=list)
    # (seconds in, ms of the small reference loop then): the VM's speed moves between windows
    references: list[tuple[float, float]] = field(default_factory=list)
    postgres_cpu_s: float | None = None  # the run's database backends (None: not readable)
    # (seconds in, pulls so far, the run's Postgres backends' CPU seconds so far), read with
    # each reference loop: whether a slower window is the scheduler's or Postgres's work
    postgres_marks: list[tuple[float, int, float]] = field(default_factory=list)


def timed_step(ctx: EngineContext, t: Timings) -> None:
    """One scheduler pass, as `scheduling.pipeline.step` does it, timing each cycle."""
    items = ctx.dispatcher.drain()
    if items:
        start = time.perf_counter()
        ingest_batch(ctx, items)
        t.ingest.append(time.perf_counter() - start)
        t.results += len(items)
    start = time.perf_counter()
    if ctx.housekeeping_due():  # as `step`: not every pass while passes run back to back
        with fenced(ctx) as session:
            finish_tracks_and_jobs(session, ctx.clock())
    t.finish.append(time.perf_counter() - start)
    start = time.perf_counter()
    selected, dispatched = select_and_dispatch(ctx)
    t.select.append(time.perf_counter() - start)
    t.pulls += selected
    ctx.stopped_at_bound(selected, dispatched)


def measure(ctx: EngineContext, seconds: float, min_steps: int = 3) -> Timings:
    """Timed scheduler passes for about `seconds` after WARMUP_STEPS untimed ones; full garbage
    collections run between passes (`PassCollector`), in the wall time but in no pass."""
    collector = PassCollector()
    collector.start()
    for _ in range(WARMUP_STEPS):
        timed_step(ctx, Timings())
    collector.between_passes()
    engine = ctx.factory.kw["bind"]
    postgres0 = postgres_cpu_s(engine)
    t, steps, start, cpu0 = Timings(), 0, time.perf_counter(), time.process_time()
    while steps < min_steps or time.perf_counter() - start < seconds:
        timed_step(ctx, t)
        collector.between_passes()
        steps += 1
        at = time.perf_counter() - start
        if not t.references or at - t.references[-1][0] >= REFERENCE_EVERY_S:
            before = time.process_time()
            t.references.append((at, python_reference_ms(2, REFERENCE_ADDITIONS)))
            backends = used_between(postgres0, postgres_cpu_s(engine))
            if backends is not None:
                t.postgres_marks.append((at, t.pulls, backends))
            cpu0 += time.process_time() - before  # not the scheduler's
        t.marks.append((at, t.pulls))
        t.cpu_marks.append((t.pulls, time.process_time() - cpu0))
    t.wall_s = time.perf_counter() - start
    t.postgres_cpu_s = used_between(postgres0, postgres_cpu_s(engine))
    collector.stop()
    return t


def summarize(jobs: int, frontier: int, t: Timings) -> dict[str, Any]:
    """Rates and percentiles of one configuration."""
    sel_s, ing_s = sum(t.select), sum(t.ingest)
    per_pull = cpu_per_pull(t, FLAT_WINDOW_S)
    return {
        "jobs": jobs, "frontier": frontier, "steps": len(t.select), "wall_s": t.wall_s,
        "select_cycles_per_s": len(t.select) / sel_s if sel_s else float("nan"),
        "select_p50_ms": percentile_ms(t.select, 50), "select_p99_ms": percentile_ms(t.select, 99),
        "pulls_selected": t.pulls,
        "select_ms_per_pull": 1000 * sel_s / t.pulls if t.pulls else float("nan"),
        "ingest_cycles_per_s": len(t.ingest) / ing_s if ing_s else float("nan"),
        "results_applied": t.results,
        "results_per_s_ingesting": t.results / ing_s if ing_s else float("nan"),
        "ingest_ms_per_result": 1000 * ing_s / t.results if t.results else float("nan"),
        "ingest_p50_ms": percentile_ms(t.ingest, 50), "ingest_p99_ms": percentile_ms(t.ingest, 99),
        "finish_p99_ms": percentile_ms(t.finish, 99),
        "pulls_per_s": t.pulls / t.wall_s if t.wall_s else float("nan"),
        "window_pulls_per_s": window_rates(t.marks),
        "flat_window_pulls_per_s": window_rates(t.marks, FLAT_WINDOW_S),
        "cpu_ms_per_pull_windows": [ms for _, ms in per_pull],
        "postgres_cpu_ms_per_pull_windows": postgres_per_pull(t.postgres_marks, FLAT_WINDOW_S),
        "reference_ms_windows": [ref for ref, _ in cpu_in_references(t.references, per_pull)],
        "cpu_per_pull_in_references": [c for _, c in cpu_in_references(t.references, per_pull)],
        "reference_ms_median": (sorted(ms for _, ms in t.references)[len(t.references) // 2]
                                if t.references else None),
        "scheduler_cpu_ms_per_pull": (1000 * t.cpu_marks[-1][1] / t.pulls
                                      if t.pulls and t.cpu_marks else None),
        "postgres_cpu_ms_per_pull": (1000 * t.postgres_cpu_s / t.pulls
                                     if t.pulls and t.postgres_cpu_s is not None else None),
    }


def cpu_per_pull(t: Timings, window_s: float) -> list[tuple[float, float]]:
    """(window end in seconds, milliseconds of this process's CPU per pull) in consecutive
    windows of `window_s` wall seconds, the same windows as `window_rates`."""
    return per_pull_windows([(at, pulls, cpu) for (at, _), (pulls, cpu)
                             in zip(t.marks, t.cpu_marks, strict=True)], window_s)


def postgres_per_pull(marks: list[tuple[float, int, float]], window_s: float) -> list[float]:
    """Milliseconds of the run's Postgres CPU per pull in consecutive windows of about
    `window_s` (closed at the first reading after each; read once a second)."""
    return [ms for _, ms in per_pull_windows(marks, window_s)]


def per_pull_windows(points: list[tuple[float, int, float]],
                     window_s: float) -> list[tuple[float, float]]:
    """(window end, milliseconds per pull) from cumulative (seconds in, pulls, CPU seconds)
    readings, a window closing at the first reading `window_s` after the last close. A last
    window shorter than that counts when it is at least half of one: a run stops at its length,
    so its last window is nearly always a few ms short, and would otherwise go unreported."""
    out, begin, pulls0, cpu0 = [], 0.0, 0, 0.0
    for at, pulls, cpu in points:
        if at - begin >= window_s and pulls > pulls0:
            out.append((at, 1000 * (cpu - cpu0) / (pulls - pulls0)))
            begin, pulls0, cpu0 = at, pulls, cpu
    if points and points[-1][0] - begin >= window_s / 2 and points[-1][1] > pulls0:
        at, pulls, cpu = points[-1]
        out.append((at, 1000 * (cpu - cpu0) / (pulls - pulls0)))
    return out


def run_config(factory: sessionmaker[Session], jobs: int, frontier: int,
               seconds: float) -> dict[str, Any]:
    """Seed one configuration into an empty database and measure it."""
    ctx = make_context(factory)
    seed_jobs(ctx, jobs, frontier)
    return summarize(jobs, frontier, measure(ctx, seconds))


def profile_config(factory: sessionmaker[Session], jobs: int, frontier: int,
                   steps: int, top: int = 12) -> tuple[str, dict[str, float]]:
    """cProfile of `steps` scheduler passes: the functions where cumulative time goes."""
    ctx = make_context(factory)
    seed_jobs(ctx, jobs, frontier)
    profiler = cProfile.Profile()
    t = Timings()
    profiler.enable()
    for _ in range(steps):
        timed_step(ctx, t)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(r"kernelband|sqlalchemy/orm/session|sklearn|json", top)
    return out.getvalue(), hotspots(stats)


def run_grid(job_counts: tuple[int, ...], frontiers: tuple[int, ...], seconds: float,
             profile_steps: int = 0, sustained_s: float = 0.0) -> dict[str, Any]:
    """Every (jobs, frontier) configuration, each on its own fresh Postgres database; the
    largest for `sustained_s` when that is longer than `seconds`."""
    rows = []
    machine = machine_line()  # date, load, the Python reference loop and commit, at the start
    largest = (max(job_counts), max(frontiers))
    for jobs in job_counts:
        for frontier in frontiers:
            length = max(seconds, sustained_s) if (jobs, frontier) == largest else seconds
            load = load_average()
            with fresh_postgres("kb_bench_sched") as url:
                engine = make_engine(url, **LEADER_ENGINE_OPTIONS)  # as the leader's
                rows.append(run_config(make_session_factory(engine), jobs, frontier, length))
                engine.dispose()
            rows[-1]["load_before"], rows[-1]["load_after"] = load, load_average()
            print(json.dumps(rows[-1]), flush=True)
    profile, shares = "", dict[str, float]()
    if profile_steps:
        with fresh_postgres("kb_bench_prof") as url:
            engine = make_engine(url, **LEADER_ENGINE_OPTIONS)  # as the leader's
            profile, shares = profile_config(make_session_factory(engine), max(job_counts),
                                     max(frontiers), profile_steps)
            engine.dispose()
    return {"label": SIMULATED, "seconds_per_config": seconds, "sustained_s": sustained_s,
            "rows": rows, "profile": profile, "hotspots": shares, "machine": machine,
            "load_at_end": load_average()}


# The sustained configuration, run by another tree's own code (`alternate`): its row as JSON.
_SUSTAINED = ("import json; from bench.scheduler_throughput import run_grid; "
              "print(json.dumps(run_grid((100,), (1000,), {s}, 0, {s})['rows'][0]))")


def alternate(rev: str, rounds: int, seconds: float) -> dict[str, Any]:
    """The sustained configuration run `rounds` times at `rev` (a clean export) and in this
    tree, alternately, `rev` first: the load of a shared machine moves within minutes, so only
    runs taken in turn compare code rather than load."""
    commit_of = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kb_sched_before_") as before:
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", before], input=archive, check=True)
        for number in range(1, rounds + 1):
            for tree, where in (("before", Path(before)), ("after", ROOT)):
                runs.append({"round": number, "tree": tree, **_sustained_in(where, seconds)})
                print(json.dumps(runs[-1]), flush=True)
    return {"against": commit_of, "runs": runs}


def _sustained_in(tree: Path, seconds: float) -> dict[str, Any]:
    """The sustained configuration's row, measured by the code of `tree` in a fresh process."""
    done = subprocess.run([sys.executable, "-c", _SUSTAINED.format(s=seconds)], cwd=tree,
                          env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True,
                          text=True, check=True)
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return row


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: --quick runs 1 and 10 jobs x 10 and 100 candidates for 1 s each."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small grid, 1 s per configuration")
    parser.add_argument("--seconds", type=float, default=None, help="measuring time per config")
    parser.add_argument("--profile-steps", type=int, default=None)
    parser.add_argument("--against", metavar="REV", default=None,
                        help="also run the sustained configuration alternately at REV and here")
    parser.add_argument("--rounds", type=int, default=2, help="alternations with --against")
    parser.add_argument("--write", action="store_true",
                        help="also write the section of bench/RESULTS.md and the plot")
    args = parser.parse_args(argv)
    grid: tuple[tuple[int, ...], tuple[int, ...]]
    if args.quick:
        grid, seconds, prof = ((1, 10), (10, 100)), 1.0, 0
    else:
        grid, seconds, prof = ((1, 10, 100), (10, 100, 1000)), 5.0, 6
    data = run_grid(grid[0], grid[1], args.seconds or seconds,
                    prof if args.profile_steps is None else args.profile_steps,
                    0.0 if args.quick else SUSTAINED_S)
    if args.against:
        data["comparison"] = alternate(args.against, args.rounds, SUSTAINED_S)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / "scheduler_throughput.json").write_text(json.dumps(data, indent=2))
    if args.write:
        plot(data)
        text = section(data)  # the CPU per pull goes above the plot
        plot_line = text.rindex("\n\n![")
        write_section("scheduler-throughput", text[:plot_line] + cpu_note(largest_row(data))
                      + text[plot_line:])
    return data


if __name__ == "__main__":
    main()


__all__ = ["SIMULATED", "SIM_TASKS", "Timings", "cpu_in_references", "make_context", "measure", "plot", "run_config",
           "run_grid", "section", "seed_jobs", "summarize", "targets"]
