"""The API load benchmark's server side: a seeded database, uvicorn, and CPU accounting.

The server under test is uvicorn (bench.processes.start_api) on a fresh, migrated
Postgres database seeded with a job whose events and candidates come from real engine steps
fed SIMULATED task results. CPU is read from /proc: the uvicorn process tree (supervisor and
workers), the Postgres backends serving the benchmark's database, and the whole machine.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.engine import make_url

from bench.common import ADMIN_URL
from bench.processes import descendants, process_cpu_s
from bench.scheduler_throughput import make_context, seed_jobs
from kernelband.db import repository
from kernelband.db.models import Event, Team, Worker
from kernelband.db.session import make_engine, make_session_factory, session_scope
from kernelband.public_ids import for_session
from kernelband.scheduling.pipeline import step
from services.api.teams import create_token

SIMULATED_WORKERS = 50  # fleet rows the dashboard mix's fleet view lists


def seed_api_job(url: str, steps: int = 30) -> tuple[str, str, int]:
    """A running job with events and candidates, and SIMULATED_WORKERS worker rows as heartbeats
    leave them (no worker runs); returns (the job's public id, API token, last event seq)."""
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
        public = for_session(session).encode("job", job_id)
        session.add_all([Worker(name=f"sim-gpu-{i}", queue="gpu.h100", target="h100",
                                gpu_name="SIMULATED H100") for i in range(SIMULATED_WORKERS)])
    engine.dispose()
    return public, token, last


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process and its descendants (uvicorn's supervisor and workers) so far."""
    return sum(cpu for p in (pid, *descendants(pid)) if (cpu := process_cpu_s(p)) == cpu)


def backend_pids(url: str, state: str | None = None) -> list[int]:
    """The Postgres backend processes connected to `url`'s database (those in `state` if given)."""
    sql = "SELECT pid FROM pg_stat_activity WHERE datname = :d"
    sql += " AND state = :s" if state else ""
    engine = make_engine(ADMIN_URL)
    try:
        with engine.connect() as conn:
            return [int(p) for p in conn.scalars(text(sql), {"d": make_url(url).database,
                                                             "s": state})]
    finally:
        engine.dispose()


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU jiffies of the whole machine so far, from /proc/stat."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return float(sum(values) - idle), float(sum(values))


class CpuMeter:
    """CPU spent between `start` and `stop` by the server tree, the database's backends,
    this process (the load generator) and the whole machine (other work included)."""

    def __init__(self, server_pid: int, url: str) -> None:
        self.server_pid, self.url = server_pid, url
        self._start: dict[str, Any] = {}

    def _read(self) -> dict[str, Any]:
        backends = {p: cpu for p in backend_pids(self.url) if (cpu := process_cpu_s(p)) == cpu}
        return {"server": tree_cpu_s(self.server_pid), "backends": backends,
                "client": time.process_time(), "machine": machine_busy(),
                "wall": time.perf_counter()}

    def start(self) -> None:
        """Take the starting readings."""
        self._start = self._read()

    def stop(self) -> dict[str, float]:
        """Seconds of CPU per consumer since `start`, and the machine's busy fraction."""
        end, begin = self._read(), self._start
        postgres = sum(cpu - begin["backends"].get(pid, 0.0)
                       for pid, cpu in end["backends"].items())
        busy = end["machine"][0] - begin["machine"][0]
        total = end["machine"][1] - begin["machine"][1]
        return {"server_cpu_s": end["server"] - begin["server"], "postgres_cpu_s": postgres,
                "client_cpu_s": end["client"] - begin["client"],
                "machine_busy_pct": 100.0 * busy / total if total else float("nan"),
                "wall_s": end["wall"] - begin["wall"]}


def server_errors(log: Path) -> dict[str, Any]:
    """How many tracebacks the server logged, and the first one's final line."""
    lines = log.read_text(errors="replace").splitlines()
    finals = [m.group(1) for line in lines
              if (m := re.match(r"^[\s|+]*([A-Za-z_.]+(?:Error|Exception): .*)", line))]
    return {"server_tracebacks": sum(line.startswith("Traceback") for line in lines),
            "first_server_error": finals[0] if finals else ""}
