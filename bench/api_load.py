"""API load: job-detail and `events?after=` polling at fixed request rates against uvicorn.

The server (uvicorn, one process) runs on a fresh, migrated Postgres database seeded with a job
whose events and candidates come from real engine steps fed SIMULATED task results. This process
is the load generator: an asyncio aiohttp client sending on a fixed open-loop arrival schedule
(request i leaves at t0 + i/rate whether or not earlier ones returned), so a slow server shows
up as latency instead of a lower offered rate. Latency counts from the scheduled send time.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import aiohttp
import anyio.to_thread
import httpx
from sqlalchemy import func, select, text
from sqlalchemy.engine import make_url

from bench.common import (
    ADMIN_URL,
    RESULTS_DIR,
    ROOT,
    fmt,
    fresh_postgres,
    markdown_table,
    new_figure,
    percentile_ms,
    save_figure,
    verdict,
)
from bench.scheduler_throughput import make_context, seed_jobs
from kernelband.db import repository
from kernelband.db.models import Event, Team, Worker
from kernelband.db.session import (
    POOL_MAX_OVERFLOW,
    POOL_SIZE,
    POOL_TIMEOUT_S,
    make_engine,
    make_session_factory,
    session_scope,
)
from kernelband.scheduling.pipeline import step
from services.api.app import create_app
from services.api.deps import API_WORKER_THREADS
from services.api.teams import create_token


def seed_api_job(url: str, steps: int = 30) -> tuple[int, str, int]:
    """A running job with events and candidates; returns (job id, API token, last event seq)."""
    engine = make_engine(url)
    factory = make_session_factory(engine)
    ctx = make_context(factory)
    job_id = seed_jobs(ctx, jobs=1, frontier=20)[0]
    for _ in range(steps):
        step(ctx)
    with session_scope(factory) as session:
        job = repository.get_job(session, job_id)
        team = session.get_one(Team, job.team_id)
        token = create_token(session, team.name, "bench")  # the API's token format
        last = int(session.scalar(select(func.max(Event.seq)).where(Event.job_id == job_id)) or 0)
    engine.dispose()
    return job_id, token, last


def free_port() -> int:
    """An unused local TCP port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(url: str, port: int, log: IO[bytes],
                 threads: int | None = None) -> subprocess.Popen[bytes]:
    """uvicorn serving the API on `url`'s database (output to `log`); waits for /healthz.

    `threads` caps the server's worker threads (experiment); None keeps AnyIO's default 40."""
    env = {**os.environ, "KERNELBAND_DATABASE_URL": url, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "KB_BENCH_THREADS": str(threads or 0)}
    factory = "bench.api_load:app_with_thread_limit" if threads else "services.api.app:create_app"
    cmd = [sys.executable, "-m", "uvicorn", factory, "--factory",
           "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
           "--no-access-log"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {proc.returncode}; run `{' '.join(cmd)}` "
                               "by hand to see why")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError("uvicorn did not answer /healthz within 60 s; is the port free?")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if a saturated server is still draining after 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def run_async(coro: Any) -> Any:
    """asyncio.run in a thread of its own, so a caller's running event loop does not matter."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


TARGET_RPS, TARGET_P99_MS = 500.0, 50.0
nan = float("nan")
CONNECTIONS = 128  # client connections; more requests in flight wait in the client
POOL_CONNECTIONS = POOL_SIZE + POOL_MAX_OVERFLOW  # the API's Postgres pool (kernelband.db.session)
GRACE_S = 15.0  # after the schedule ends, wait this long for answers, then give up


MIXES = ("full", "dashboard")
# The dashboard mix, per 10 requests: 5 events polls (the job page, every second), 3 job
# details, 2 fleet views; every CHANGED_EVERY-th request finds a change (sent without a
# current ETag, so it gets the full answer), the others find none and send their ETag.
DASHBOARD_PATHS = ("events", "job", "events", "fleet", "events", "job", "events", "fleet",
                   "events", "job")
CHANGED_EVERY = 10


@dataclass(frozen=True)
class Target:
    """What the load generator polls, and how (`mix`: full answers or a dashboard's polls)."""

    base: str
    job_id: int
    token: str
    last_seq: int
    mix: str = "full"
    etags: tuple[tuple[str, str], ...] = ()  # (path, ETag) learnt before the run

    def path(self, i: int) -> str:
        """Full mix: alternate job detail and events after a recent sequence number.
        Dashboard mix: DASHBOARD_PATHS, events polled after the last number (caught up)."""
        if self.mix == "dashboard":
            kind = DASHBOARD_PATHS[i % len(DASHBOARD_PATHS)]
            return self.paths()[("events", "job", "fleet").index(kind)]
        if i % 2 == 0:
            return f"/v1/jobs/{self.job_id}"
        return f"/v1/jobs/{self.job_id}/events?after={max(0, self.last_seq - 1 - i % 10)}"

    def paths(self) -> tuple[str, str, str]:
        """The dashboard mix's three URLs: events, job detail, fleet."""
        return (f"/v1/jobs/{self.job_id}/events?after={self.last_seq}",
                f"/v1/jobs/{self.job_id}", "/v1/fleet")

    def headers(self, i: int) -> dict[str, str]:
        """If-None-Match with the learnt ETag, except for requests that find a change."""
        if self.mix != "dashboard" or i % CHANGED_EVERY == CHANGED_EVERY - 1:
            return {}
        tag = dict(self.etags).get(self.path(i))
        return {"If-None-Match": tag} if tag else {}


def learn_etags(target: Target) -> Target:
    """The dashboard mix's ETags, as a dashboard has them after its first load."""
    auth = {"Authorization": f"Bearer {target.token}"}
    found = []
    for path in target.paths():
        tag = httpx.get(target.base + path, headers=auth, timeout=10).headers.get("ETag")
        if tag:
            found.append((path, tag))
    return Target(target.base, target.job_id, target.token, target.last_seq, "dashboard",
                  tuple(found))


async def _one(client: aiohttp.ClientSession, gate: asyncio.Semaphore, path: str,
               headers: dict[str, str], due: float, out: list[tuple[float, bool, int]]) -> None:
    delay = due - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)
    # Waiting here (not in the client's pool) keeps the client cheap under overload; the wait
    # still counts, latency runs from `due`.
    status = 0
    async with gate:
        try:
            async with client.get(path, headers=headers) as response:
                await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError):
            status = 0
    out.append((time.perf_counter() - due, status in (200, 304), status))


async def run_rate(target: Target, rate: float, seconds: float,
                   probe: Callable[[], int] | None = None) -> dict[str, Any]:
    """Offer `rate` requests/s for `seconds` on an open-loop schedule; latency and throughput.

    `probe` runs once when the schedule ends (e.g. counting stuck database connections)."""
    results: list[tuple[float, bool, int]] = []
    gate = asyncio.Semaphore(CONNECTIONS)
    headers = {"Authorization": f"Bearer {target.token}"}
    connector = aiohttp.TCPConnector(limit=CONNECTIONS)
    async with aiohttp.ClientSession(base_url=target.base, headers=headers, connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=30.0)) as client:
        count = int(rate * seconds)
        t0 = time.perf_counter() + 0.05
        tasks = [asyncio.create_task(_one(client, gate, target.path(i), target.headers(i),
                                          t0 + i / rate, results))
                 for i in range(count)]
        await asyncio.sleep(max(0.0, t0 + seconds - time.perf_counter()))
        probed = await asyncio.to_thread(probe) if probe else None
        _, late = await asyncio.wait(tasks, timeout=max(0.0, t0 + seconds + GRACE_S
                                                        - time.perf_counter()))
        for task in late:  # still unanswered long after the schedule ended: count as errors
            task.cancel()
        span = min(time.perf_counter() - t0, seconds + GRACE_S)
    good = [lat for lat, ok, _ in results if ok]
    return {"mix": target.mix, "offered_rps": rate, "requests": count,
            "errors": count - len(good),
            "not_modified": sum(status == 304 for _, _, status in results),
            "unanswered": len(late), "db_idle_in_transaction_at_end": probed,
            "throughput_rps": len(good) / span, "p50_ms": percentile_ms(good, 50),
            "p99_ms": percentile_ms(good, 99), "max_ms": percentile_ms(good, 100)}


def idle_in_transaction(url: str) -> Callable[[], int]:
    """A probe counting the database's connections left idle inside a transaction."""
    name = make_url(url).database

    def probe() -> int:
        engine = make_engine(ADMIN_URL)
        try:
            with engine.connect() as conn:
                return int(conn.scalar(text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = :d "
                    "AND state = 'idle in transaction'"), {"d": name}) or 0)
        finally:
            engine.dispose()

    return probe


def process_cpu_s(pid: int) -> float:
    """User+system CPU seconds of a process so far (Linux /proc; nan elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_errors(log: IO[bytes]) -> dict[str, Any]:
    """How many tracebacks the server logged, and the first one's final line."""
    log.seek(0)
    lines = log.read().decode(errors="replace").splitlines()
    finals = [m.group(1) for line in lines
              if (m := re.match(r"^[\s|+]*([A-Za-z_.]+(?:Error|Exception): .*)", line))]
    return {"server_tracebacks": sum(line.startswith("Traceback") for line in lines),
            "first_server_error": finals[0] if finals else ""}


Plan = tuple[tuple[str, float], ...]  # (mix, offered req/s), run in this order


def serve_rates(url: str, job: tuple[int, str, int], plan: Plan, seconds: float,
                threads: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Start a server, offer each (mix, rate) in turn, stop it; rows and the server's errors."""
    with tempfile.TemporaryFile() as log:
        port = free_port()
        server = start_server(url, port, log, threads)
        rows: list[dict[str, Any]] = []
        try:
            full = Target(f"http://127.0.0.1:{port}", *job)
            run_async(run_rate(full, 20, 1.0))  # warm-up: connections, caches
            dashboard = learn_etags(full)
            for mix, rate in plan:
                target = dashboard if mix == "dashboard" else full
                cpu = process_cpu_s(server.pid)
                rows.append(run_async(run_rate(target, rate, seconds, idle_in_transaction(url))))
                served = rows[-1]["requests"] - rows[-1]["errors"]
                rows[-1]["server_cpu_ms_per_request"] = (
                    1000 * (process_cpu_s(server.pid) - cpu) / served if served else float("nan"))
                print(json.dumps({"threads": threads, **rows[-1]}), flush=True)
        finally:
            stop_server(server)
        return rows, server_errors(log)


SIMULATED_WORKERS = 50  # fleet rows the dashboard mix's fleet view lists


def seed_workers(url: str, count: int = SIMULATED_WORKERS) -> None:
    """Worker rows as heartbeats leave them (SIMULATED: no worker runs)."""
    engine = make_engine(url)
    with session_scope(make_session_factory(engine)) as session:
        session.add_all([Worker(name=f"sim-gpu-{i}", queue="gpu.h100", target="h100",
                                gpu_name="SIMULATED H100") for i in range(count)])
    engine.dispose()


def run_load(plan: Plan, seconds: float, experiment_threads: int | None = None,
             capped_rate: float = TARGET_RPS) -> dict[str, Any]:
    """Seed a fresh database and offer each (mix, rate); optionally re-run the target rate of
    the full mix on a server whose worker threads are capped (`experiment_threads`)."""
    with fresh_postgres("kb_bench_api") as url:
        job = seed_api_job(url)
        seed_workers(url)
        rows, errors = serve_rates(url, job, plan, seconds)
        capped = (serve_rates(url, job, (("full", capped_rate),), seconds,
                              experiment_threads)[0] if experiment_threads else [])
    return {"seconds_per_rate": seconds, "events_in_job": job[2], "rows": rows, **errors,
            "capped_threads": experiment_threads, "capped_rows": capped,
            "server": "uvicorn, 1 process, Postgres",
            "client": f"asyncio aiohttp, open loop, {CONNECTIONS} connections"}


def app_with_thread_limit() -> Any:
    """The API app with AnyIO's worker-thread limit set from KB_BENCH_THREADS (experiment)."""
    app = create_app()
    tokens = int(os.environ["KB_BENCH_THREADS"])

    async def wrapper(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":  # runs on the server's event loop, before requests
            anyio.to_thread.current_default_thread_limiter().total_tokens = tokens
        await app(scope, receive, send)

    return wrapper




def target_met(data: dict[str, Any]) -> tuple[bool | None, str]:
    """Dashboard mix at 500 req/s offered: p99 <= 50 ms, no errors and >= 98% of it achieved
    (the rate counts the time to drain the last answers). None when it was not offered."""
    row = next((r for r in data["rows"] if r.get("mix", "full") == "dashboard"
                and r["offered_rps"] == TARGET_RPS), None)
    if row is None:
        return None, "dashboard mix at 500 req/s not run (quick mode)"
    met = (row["p99_ms"] <= TARGET_P99_MS and row["errors"] == 0
           and row["throughput_rps"] >= 0.98 * TARGET_RPS)
    return met, (f"dashboard mix: {fmt(row['throughput_rps'])} req/s achieved, p99 "
                 f"{fmt(row['p99_ms'])} ms, {row['errors']} errors, "
                 f"{fmt(row.get('server_cpu_ms_per_request', nan), 2)} ms server CPU/request")


def section(data: dict[str, Any]) -> str:
    """The RESULTS.md section: method, table and plot."""
    rows = [(r.get("mix", "full"), fmt(r["offered_rps"], 0), fmt(r["throughput_rps"]),
             f"{100 * r.get('not_modified', 0) / max(1, r['requests']):.0f}%",
             f"{r['errors']} ({r.get('unanswered', 0)})", fmt(r["p50_ms"]),
             fmt(r["p99_ms"]), fmt(r["max_ms"]), fmt(r.get("server_cpu_ms_per_request", nan), 2),
             r.get("db_idle_in_transaction_at_end", "-"))
            for r in data["rows"]]
    table = markdown_table(("mix", "offered req/s", "achieved req/s", "304", "errors (unanswered)", "p50 ms",
                            "p99 ms", "max ms", "server CPU ms/request",
                            "DB conns idle in transaction at end"), rows)
    cpu = [r["server_cpu_ms_per_request"] for r in data["rows"]
           if r.get("mix", "full") == "full"
           and r.get("server_cpu_ms_per_request", nan) == r.get("server_cpu_ms_per_request")]
    if cpu:
        low = min(cpu)
        table += (f"\n\nWhere the time goes: a full answer costs the server process at least "
                  f"{low:.2f} ms of CPU (auth token lookup, job or events query, JSON), so one "
                  f"uvicorn process serves full answers near {1000 / low:,.0f} req/s per fully "
                  f"free core (estimated from CPU time); a 304 reads the token and one small "
                  f"row. Beyond saturation, requests queue for the "
                  f"{API_WORKER_THREADS} worker threads and {POOL_CONNECTIONS} database "
                  f"connections, latency grows with the backlog (open loop), and a request that "
                  f"waits {POOL_TIMEOUT_S:.0f} s for a connection gets 503 database_busy. The "
                  "load generator needs CPU on the same cores.")
    stuck = max((r.get("db_idle_in_transaction_at_end") or 0 for r in data["rows"]), default=0)
    if stuck:
        table += (f"\n\nAt the end of the schedule up to {stuck} database connection(s) were idle "
                  "in a transaction (a snapshot: a request between its queries holds one "
                  "briefly). Authentication and each endpoint use short sessions of their own, "
                  "so no connection is held across worker-thread hops.")
    if data.get("server_tracebacks"):
        table += (f"\n\nThe server logged {data['server_tracebacks']} tracebacks; the first "
                  f"error: `{data['first_server_error'][:200]}`.")
    if data.get("capped_rows"):
        r = data["capped_rows"][0]
        table += (f"\n\nExperiment (not the shipped configuration): the same server with its "
                  f"worker threads capped at {data['capped_threads']} (= the database pool) at "
                  f"{fmt(r['offered_rps'], 0)} req/s: {fmt(r['throughput_rps'])} req/s achieved, "
                  f"{r['errors']} errors, p50 {fmt(r['p50_ms'])} ms, p99 {fmt(r['p99_ms'])} ms, "
                  f"{r.get('db_idle_in_transaction_at_end')} connections idle in transaction at "
                  "the end.")
    met, why = target_met(data)
    word = "not evaluated" if met is None else verdict(met)
    return (f"## API load\n\nCommand: `python -m bench.api_load`. {data['server']}; load "
            f"generator: {data['client']} in the benchmark process (the server is a separate "
            f"process), {data['seconds_per_rate']:g} s per rate; latency counted from the "
            f"scheduled send time. Mix `full`: half `GET /v1/jobs/{{id}}` and half "
            f"`GET /v1/jobs/{{id}}/events?after=N` with 1-10 new events, no ETag (every answer "
            f"is built in full). Mix `dashboard`: what open dashboards send, per 10 requests 5 "
            f"events polls after the last event, 3 job details and 2 fleet views "
            f"({SIMULATED_WORKERS} SIMULATED worker rows); 1 in {CHANGED_EVERY} finds a change "
            f"(sent without a current ETag: full answer), the others send the ETag of their "
            f"last answer and find none (304). The job's {data['events_in_job']} events came "
            f"from engine steps fed simulated task results. Client and server share this "
            f"machine's cores.\n\n{table}\n\nTarget >= 500 req/s at p99 <= 50 ms on the "
            f"dashboard mix: **{word}** ({why}).\n\n"
            "![api load](results/api_load.png)")


def plot(data: dict[str, Any]) -> None:
    """p50/p99 latency against the offered rate, one line per mix."""
    fig, (ax,) = new_figure()
    for mix in MIXES:
        rows = [r for r in data["rows"] if r.get("mix", "full") == mix]
        rates = [r["offered_rps"] for r in rows]
        if rows:
            ax.plot(rates, [r["p50_ms"] for r in rows], "o-", label=f"{mix} p50")
            ax.plot(rates, [r["p99_ms"] for r in rows], "s-", label=f"{mix} p99")
    ax.axhline(TARGET_P99_MS, ls="--", c="grey", label="p99 target")
    ax.set_xlabel("offered requests/s")
    ax.set_ylabel("latency ms (log)")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("API polling latency (uvicorn + Postgres)")
    save_figure(fig, "api_load.png")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: --quick offers 50 and 100 req/s of each mix for 2 s each."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="50 and 100 req/s, 2 s each")
    parser.add_argument("--seconds", type=float, default=None, help="duration per rate")
    parser.add_argument("--capped-threads", type=int, default=None,
                        help="also run the full mix at 500 req/s with this many worker threads")
    args = parser.parse_args(argv)
    plan: Plan
    if args.quick:
        plan, seconds = (("full", 50.0), ("dashboard", 50.0), ("dashboard", 100.0)), 2.0
    else:
        plan = (("full", 100.0), ("full", 250.0), ("full", 500.0),
                ("dashboard", 250.0), ("dashboard", 500.0), ("dashboard", 750.0))
        seconds = 5.0
    data = run_load(plan, args.seconds or seconds, args.capped_threads)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / "api_load.json").write_text(json.dumps(data, indent=2))
    return data


if __name__ == "__main__":
    main()
