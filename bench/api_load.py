"""API load: job-detail and `events?after=` polling at fixed request rates against uvicorn.

The server (uvicorn, one process) runs on a fresh, migrated Postgres database seeded with a job
whose events and candidates come from real engine steps fed SIMULATED task results. This process
is the load generator: an asyncio httpx client sending on a fixed open-loop arrival schedule
(request i leaves at t0 + i/rate whether or not earlier ones returned), so a slow server shows
up as latency instead of a lower offered rate. Latency counts from the scheduled send time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import httpx
from sqlalchemy import func, select

from bench.common import (
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
from kernelband.db.models import Event, Team
from kernelband.db.session import make_engine, make_session_factory, session_scope
from kernelband.engine import step
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


def start_server(url: str, port: int) -> subprocess.Popen[bytes]:
    """uvicorn serving the API on `url`'s database; waits until /healthz answers."""
    env = {**os.environ, "KERNELBAND_DATABASE_URL": url, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    cmd = [sys.executable, "-m", "uvicorn", "services.api.app:create_app", "--factory",
           "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
           "--no-access-log"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
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


@dataclass(frozen=True)
class Target:
    """What the load generator polls."""

    base: str
    job_id: int
    token: str
    last_seq: int

    def path(self, i: int) -> str:
        """Alternate job detail and an events poll after a recent sequence number."""
        if i % 2 == 0:
            return f"/v1/jobs/{self.job_id}"
        return f"/v1/jobs/{self.job_id}/events?after={max(0, self.last_seq - 1 - i % 10)}"


async def _one(client: httpx.AsyncClient, path: str, due: float,
               out: list[tuple[float, bool]]) -> None:
    delay = due - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)
    try:
        ok = (await client.get(path)).status_code == 200
    except httpx.HTTPError:
        ok = False
    out.append((time.perf_counter() - due, ok))


async def run_rate(target: Target, rate: float, seconds: float) -> dict[str, Any]:
    """Offer `rate` requests/s for `seconds` on an open-loop schedule; latency and throughput."""
    results: list[tuple[float, bool]] = []
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
    headers = {"Authorization": f"Bearer {target.token}"}
    async with httpx.AsyncClient(base_url=target.base, headers=headers, limits=limits,
                                 timeout=30.0) as client:
        count = int(rate * seconds)
        t0 = time.perf_counter() + 0.05
        tasks = [asyncio.create_task(_one(client, target.path(i), t0 + i / rate, results))
                 for i in range(count)]
        await asyncio.gather(*tasks)
        span = time.perf_counter() - t0
    good = [lat for lat, ok in results if ok]
    return {"offered_rps": rate, "requests": count, "errors": count - len(good),
            "throughput_rps": len(good) / span, "p50_ms": percentile_ms(good, 50),
            "p99_ms": percentile_ms(good, 99), "max_ms": percentile_ms(good, 100)}


def run_load(rates: tuple[float, ...], seconds: float) -> dict[str, Any]:
    """Seed a fresh database, start uvicorn, and offer each rate in turn."""
    with fresh_postgres("kb_bench_api") as url:
        job_id, token, last = seed_api_job(url)
        port = free_port()
        server = start_server(url, port)
        try:
            target = Target(f"http://127.0.0.1:{port}", job_id, token, last)
            asyncio.run(run_rate(target, 20, 1.0))  # warm-up: connections, caches
            rows = []
            for rate in rates:
                rows.append(asyncio.run(run_rate(target, rate, seconds)))
                print(json.dumps(rows[-1]), flush=True)
        finally:
            server.terminate()
            server.wait(timeout=30)
    return {"seconds_per_rate": seconds, "events_in_job": last, "rows": rows,
            "server": "uvicorn, 1 process, Postgres", "client": "asyncio httpx, open loop"}


TARGET_RPS, TARGET_P99_MS = 500.0, 50.0


def target_met(data: dict[str, Any]) -> tuple[bool | None, str]:
    """p99 <= 50 ms with no errors at 500 req/s (None when 500 req/s was not offered)."""
    row = next((r for r in data["rows"] if r["offered_rps"] == TARGET_RPS), None)
    if row is None:
        return None, "500 req/s not run (quick mode)"
    met = row["p99_ms"] <= TARGET_P99_MS and row["errors"] == 0
    return met, f"p99 {fmt(row['p99_ms'])} ms, {row['errors']} errors at 500 req/s"


def section(data: dict[str, Any]) -> str:
    """The RESULTS.md section: method, table and plot."""
    rows = [(fmt(r["offered_rps"], 0), fmt(r["throughput_rps"]), r["errors"], fmt(r["p50_ms"]),
             fmt(r["p99_ms"]), fmt(r["max_ms"])) for r in data["rows"]]
    table = markdown_table(("offered req/s", "achieved req/s", "errors", "p50 ms", "p99 ms",
                            "max ms"), rows)
    met, why = target_met(data)
    word = "not evaluated" if met is None else verdict(met)
    return (f"## API load\n\nCommand: `python -m bench.api_load`. {data['server']}; load "
            f"generator: {data['client']} in the benchmark process (the server is a separate "
            f"process), half `GET /v1/jobs/{{id}}` and half `GET /v1/jobs/{{id}}/events?after=N`, "
            f"{data['seconds_per_rate']:g} s per rate; latency counted from the scheduled send "
            f"time. The job's {data['events_in_job']} events came from engine steps fed "
            f"simulated task results. Client and server share this machine's cores.\n\n"
            f"{table}\n\nTarget p99 <= 50 ms at 500 req/s: **{word}** ({why}).\n\n"
            "![api load](results/api_load.png)")


def plot(data: dict[str, Any]) -> None:
    """p50/p99 latency and achieved throughput against the offered rate."""
    fig, (ax,) = new_figure()
    rates = [r["offered_rps"] for r in data["rows"]]
    ax.plot(rates, [r["p50_ms"] for r in data["rows"]], "o-", label="p50")
    ax.plot(rates, [r["p99_ms"] for r in data["rows"]], "s-", label="p99")
    ax.axhline(TARGET_P99_MS, ls="--", c="grey", label="p99 target")
    ax.set_xlabel("offered requests/s")
    ax.set_ylabel("latency ms (log)")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("API polling latency (uvicorn + Postgres)")
    save_figure(fig, "api_load.png")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: --quick offers 50 and 100 req/s for 2 s each."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="50 and 100 req/s, 2 s each")
    parser.add_argument("--seconds", type=float, default=None, help="duration per rate")
    args = parser.parse_args(argv)
    rates, seconds = ((50.0, 100.0), 2.0) if args.quick else ((100.0, 250.0, 500.0, 1000.0), 8.0)
    data = run_load(rates, args.seconds or seconds)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / "api_load.json").write_text(json.dumps(data, indent=2))
    return data


if __name__ == "__main__":
    main()
