"""Fleet scaling, SIMULATED GPUs: the real scheduler, Redis and Postgres feeding N GPU workers.

For each fleet size N (10, 100, 1,000): a fresh Postgres database with running jobs (target
h100, spread over 10 teams, enough pulls in flight to keep N GPUs fed), a Redis database of
its own, the real scheduler process (`python -m services.scheduler`) and one process playing
the workers (bench/fleet_worker.py): N GPU slots whose profile tasks take a lognormal time
around `--median-s` (1.5 s by default: a candidate's GPU time once the measuring step got
faster), and instant LLM and CPU answers; the task time is recorded with the results. No kernel, compiler or LLM runs. Measured over a
window after a warm-up: the GPU-busy fraction (time in service / N x window) and pulls
finished per second, with the scheduler's CPU time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import func, select
from sqlalchemy.pool import NullPool

from bench.api_load import process_cpu_s
from bench.common import (
    RESULTS_DIR,
    ROOT,
    fmt,
    fresh_postgres,
    load_average,
    machine_line,
    markdown_table,
    new_figure,
    python_reference_ms,
    save_figure,
    verdict,
    write_section,
)
from bench.scheduler_throughput_cpu import postgres_cpu_s, used_between
from kernelband.db import repository
from kernelband.db.models import Event
from kernelband.db.session import make_engine, make_session_factory, session_scope

LABEL = "SIMULATED GPU workers (lognormal service times), real scheduler, Redis and Postgres"
# A pull's GPU time: about 3.3 s on an H100 before the measuring step got faster, about 1.5 s
# after; the benchmark's default is the newer figure (`--median-s` sets another).
MEDIAN_S, SIGMA = 1.5, 0.3
TEAMS = 10
REDIS_BASE = os.environ.get("KERNELBAND_BENCH_REDIS_URL", "redis://127.0.0.1:6379")
CLAIM_KEY = "kernelband:test-claim"  # shared with the tests (tests/utils/processes.py)
CLAIM_DBS = tuple(db for db in range(15, 1, -1) if db not in (12, 14))  # as the tests claim
TARGET_BUSY = 0.9


@contextmanager
def private_redis() -> Iterator[str]:
    """An empty Redis database claimed for this run (the tests' claim protocol), emptied after."""
    for db in CLAIM_DBS:
        client = redis.Redis.from_url(f"{REDIS_BASE}/{db}")
        try:
            if client.dbsize() == 0 and client.set(CLAIM_KEY, str(os.getpid()), nx=True, ex=3600):
                break
        finally:
            client.close()
    else:
        raise SystemExit(f"no empty Redis database among {list(CLAIM_DBS)} at {REDIS_BASE}; "
                         "free one (FLUSHDB) or set KERNELBAND_BENCH_REDIS_URL")
    try:
        yield f"{REDIS_BASE}/{db}"
    finally:
        client = redis.Redis.from_url(f"{REDIS_BASE}/{db}")
        client.flushdb()
        client.close()


def seed(url: str, gpus: int) -> int:
    """Queued h100 jobs whose parallelism covers `gpus` with 20% to spare; returns pulls in flight."""
    jobs = min(100, gpus)
    parallelism = math.ceil(1.2 * gpus / jobs)
    engine = make_engine(url)
    with session_scope(make_session_factory(engine)) as session:
        for i in range(jobs):
            team = repository.get_or_create_team(session, f"fleet-team-{i % TEAMS}")
            problem = repository.get_or_create_problem(
                session, team.id, "fleet", "native", "ORIGINAL", {"editable": "ORIGINAL"},
                "f" * 64)
            repository.create_job(session, team.id, problem.id, ("h100",), seed=i,
                                  budget_iterations=100_000, parallelism=parallelism)
    engine.dispose()
    return jobs * parallelism


def pulls_done(url: str) -> int:
    """Pulls finished so far over every track, from the event log (the tracks' counters are
    written with their policy states, seconds behind the running leader)."""
    engine = make_engine(url)
    with session_scope(make_session_factory(engine)) as session:
        done = int(session.scalar(select(func.count(Event.id))
                                  .where(Event.kind == "pull_finished")) or 0)
    engine.dispose()
    return done


def busy_seconds(spans: dict[str, Any], start: float, end: float) -> float:
    """GPU time in service inside [start, end] (tasks still running count until `end`)."""
    total = sum(max(0.0, min(e, end) - max(s, start)) for s, e in spans["spans"])
    stop = spans["stopped_at"]
    return total + sum(max(0.0, min(stop, end) - max(s, start)) for s in spans["in_service_since"])


def wait_until_ready(marker: Path, process: subprocess.Popen[bytes],
                     timeout_s: float = 180.0) -> None:
    """Wait for the simulated fleet to start serving (imports take a while on a busy machine)."""
    deadline = time.monotonic() + timeout_s
    while not marker.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the simulated fleet did not start; run `python -m "
                               "bench.fleet_worker --help` to check it imports")
        time.sleep(0.1)


def run_fleet(gpus: int, warmup_s: float, window_s: float,
              median_s: float = MEDIAN_S) -> dict[str, Any]:
    """One fleet size on fresh databases; the busy fraction and pulls/s over the window."""
    with fresh_postgres("kb_bench_fleet") as url, private_redis() as broker, \
            tempfile.TemporaryDirectory() as tmp:
        in_flight = seed(url, gpus)
        probe = make_engine(url, poolclass=NullPool)  # reads the backends' CPU (/proc)
        reference_ms = python_reference_ms()  # the machine's speed just before this size
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("KERNELBAND_")},
               "KERNELBAND_DATABASE_URL": url, "KERNELBAND_BROKER_URL": broker,
               "KERNELBAND_RESULT_BACKEND_URL": broker, "KERNELBAND_POLL_INTERVAL_S": "0.05",
               "KERNELBAND_MAX_IN_FLIGHT_PER_TEAM": "100000",
               "KERNELBAND_MAX_JOB_STARTS_PER_TEAM": "100", "PYTHONPATH": str(ROOT),
               "LITELLM_LOCAL_MODEL_COST_MAP": "True", "KERNELBAND_LOG_LEVEL": "WARNING"}
        out = Path(tmp) / "spans.json"
        with (Path(tmp) / "scheduler.log").open("wb") as log:
            scheduler = subprocess.Popen([sys.executable, "-m", "services.scheduler", "--name",
                                          "bench-fleet"], cwd=ROOT, env=env, stdout=log,
                                         stderr=subprocess.STDOUT)
            workers = subprocess.Popen([sys.executable, "-m", "bench.fleet_worker", "--broker",
                                        broker, "--gpus", str(gpus), "--median-s", str(median_s),
                                        "--sigma", str(SIGMA), "--out", str(out)], cwd=ROOT,
                                       env=env, stdout=log, stderr=subprocess.STDOUT)
            try:
                wait_until_ready(out.with_suffix(".ready"), workers)
                time.sleep(warmup_s)
                start, done0, cpu0 = time.monotonic(), pulls_done(url), process_cpu_s(scheduler.pid)
                fleet0, postgres0 = process_cpu_s(workers.pid), postgres_cpu_s(probe)
                time.sleep(window_s)
                end, done1, cpu1 = time.monotonic(), pulls_done(url), process_cpu_s(scheduler.pid)
                fleet1, postgres1 = process_cpu_s(workers.pid), postgres_cpu_s(probe)
            finally:
                for proc in (workers, scheduler):
                    proc.terminate()
                for proc in (workers, scheduler):
                    try:
                        proc.wait(timeout=20)
                    except subprocess.TimeoutExpired:
                        proc.kill()
        if not out.exists():
            tail = (Path(tmp) / "scheduler.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the simulated fleet wrote no spans; its log:\n{tail}")
        spans = json.loads(out.read_text())
    busy = busy_seconds(spans, start, end)
    row = {"gpus": gpus, "median_s": median_s, "pulls_in_flight_allowed": in_flight,
           "window_s": end - start,
           "busy_fraction": busy / (gpus * (end - start)),
           "pulls_per_s": (done1 - done0) / (end - start),
           "gpu_tasks_finished": sum(1 for s, e in spans["spans"] if start <= e <= end),
           "scheduler_cpu_share": (cpu1 - cpu0) / (end - start), "reference_ms": reference_ms,
           **_cpu_per_pull(done1 - done0, scheduler=cpu1 - cpu0, fleet=fleet1 - fleet0,
                           postgres=used_between(postgres0, postgres1))}
    probe.dispose()
    print(json.dumps(row), flush=True)
    return row


def _cpu_per_pull(pulls: int, **seconds: float | None) -> dict[str, float | None]:
    """Milliseconds of CPU per pull finished in the window of each process named."""
    return {f"{name}_cpu_ms_per_pull": (1000 * cpu / pulls if pulls and cpu is not None else None)
            for name, cpu in seconds.items()}


def _cpu_cell(row: dict[str, Any]) -> str:
    """'scheduler / Postgres / fleet' ms per pull, and the scheduler's in reference loops."""
    names = ("scheduler", "postgres", "fleet")
    cells = [row.get(f"{name}_cpu_ms_per_pull") for name in names]
    if cells[0] is None:
        return "-"
    text = " / ".join("-" if ms is None else f"{ms:.2f}" for ms in cells)
    reference = row.get("reference_ms")
    return text + (f" ({cells[0] / reference:.3f})" if reference else "")


def run_scaling(fleets: tuple[int, ...], warmup_s: float, window_s: float,
                median_s: float = MEDIAN_S) -> dict[str, Any]:
    """Every fleet size in turn, with GPU tasks of median `median_s` seconds."""
    machine = machine_line()  # date, load, the Python reference loop and commit, at the start
    rows = []
    for n in fleets:
        load = load_average()
        rows.append({**run_fleet(n, warmup_s, window_s, median_s), "load_before": load,
                     "load_after": load_average()})
    return {"label": LABEL, "median_s": median_s, "sigma": SIGMA, "warmup_s": warmup_s,
            "window_s": window_s, "rows": rows, "machine": machine}


def targets(data: dict[str, Any]) -> list[tuple[str, bool | None, str]]:
    """>= 90% GPU-busy at 1,000 simulated workers, at the run's GPU task time."""
    median = f"{data['median_s']:g} s tasks"
    row = next((r for r in data["rows"] if r["gpus"] == 1000), None)
    if row is None:
        return [(f"busy >= 90% at 1,000 workers, {median}", None, "1,000 not run (quick mode)")]
    return [(f"busy >= 90% at 1,000 workers, {median}", row["busy_fraction"] >= TARGET_BUSY,
             f"{100 * row['busy_fraction']:.1f}% busy, {fmt(row['pulls_per_s'])} pulls/s")]


def section(data: dict[str, Any]) -> str:
    """The RESULTS.md section: method, table and plot."""
    rows = [(r["gpus"], r["pulls_in_flight_allowed"], f"{100 * r['busy_fraction']:.1f}%",
             fmt(r["pulls_per_s"]),
             fmt(r["gpus"] / (r.get("median_s", data["median_s"]) * 1.05), 0),
             r["gpu_tasks_finished"], f"{100 * r['scheduler_cpu_share']:.0f}%", _cpu_cell(r),
             f"{r.get('load_before', '-')} to {r.get('load_after', '-')}")
            for r in data["rows"]]
    table = markdown_table(("simulated GPUs", "pulls in flight allowed", "GPU busy",
                            "pulls/s", "pulls/s to keep all busy (estimated)",
                            "GPU tasks finished in window", "scheduler CPU (of one core)",
                            "CPU ms per pull: scheduler / Postgres / simulated fleet (scheduler "
                            "in reference loops)",
                            "load average (1/5/15 min) before and after"), rows)
    machine = f"\n\n{data['machine']}" if data.get("machine") else ""
    lines = [f"- {name}: **{'not evaluated' if met is None else verdict(met)}** ({why})"
             for name, met, why in targets(data)]
    return ("## Fleet scaling (SIMULATED GPU workers, real scheduler)\n\n"
            f"**{data['label']}.** Command: `python -m bench.fleet_scaling`. Per fleet size: a "
            "fresh Postgres database with min(100, N) running h100 jobs over 10 teams, "
            "parallelism covering N with 20% to spare, the per-team cap lifted; a Redis "
            "database of its own; the real scheduler process; one process playing N GPU "
            f"workers (`-c 1` each; lognormal service time, median {data['median_s']:g} s "
            "(`--median-s`), "
            f"sigma {data['sigma']:g}) and instant LLM and CPU workers (bench/fleet_worker.py). "
            f"{data['warmup_s']:g} s warm-up, then a {data['window_s']:g} s window: GPU busy = "
            "time in service / (N x window); pulls/s = pulls finished per second. Keeping N "
            "GPUs busy needs about N / mean service time pulls per second (estimated column). "
            "The scheduler, the simulated fleet, Redis and Postgres share this machine's "
            "cores. CPU per pull: each process's CPU time in the window (Postgres: the "
            "backends of the run's database, from /proc) over the pulls finished in it; in "
            "reference loops: over the reference loop (1,000,000 integer additions, best of "
            f"5) timed just before that fleet size.{machine}\n\n{table}\n\n" + "\n".join(lines)
            + "\n\n![fleet scaling](results/fleet_scaling.png)")


def plot(data: dict[str, Any]) -> None:
    """Busy fraction against fleet size."""
    fig, (ax,) = new_figure()
    n = [r["gpus"] for r in data["rows"]]
    ax.plot(n, [r["busy_fraction"] for r in data["rows"]], "o-", label="GPU busy fraction")
    ax.axhline(TARGET_BUSY, ls="--", c="grey", label="target 0.9")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("simulated GPU workers")
    ax.legend()
    ax.set_title("Fleet scaling (SIMULATED GPUs, real scheduler)")
    save_figure(fig, "fleet_scaling.png")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: --quick runs 10 GPUs with a short window."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10 GPUs, 5 s warm-up, 10 s window")
    parser.add_argument("--window-s", type=float, default=None)
    parser.add_argument("--median-s", type=float, default=MEDIAN_S,
                        help=f"median simulated GPU task time in seconds (default {MEDIAN_S:g})")
    parser.add_argument("--gpus", type=int, nargs="+", default=None,
                        help="fleet sizes to run (default 10 100 1000; --quick: 10)")
    parser.add_argument("--write", action="store_true",
                        help="also write the section of bench/RESULTS.md and the plot")
    args = parser.parse_args(argv)
    fleets, warmup, window = ((10,), 5.0, 10.0) if args.quick else ((10, 100, 1000), 10.0, 30.0)
    data = run_scaling(tuple(args.gpus or fleets), warmup, args.window_s or window,
                       args.median_s)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / "fleet_scaling.json").write_text(json.dumps(data, indent=2))
    if args.write:
        plot(data)
        write_section("fleet-scaling", section(data))
    return data


if __name__ == "__main__":
    main()
