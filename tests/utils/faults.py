"""Fault injection helpers for the reliability tests: own Redis servers, dropped Postgres
connections, log watching, and the reward ledger that proves nothing was lost or counted twice.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import redis
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from kernelband.db.models import Attempt, Candidate, Event, Measurement, Track
from kernelband.db.session import normalize_url, session_scope
from tests.utils.fake_llm import free_port
from tests.utils.processes import ManagedProcess, start_process, wait_for

OPEN_STATES = ("pending", "dispatched", "expired")
RECEIVED = re.compile(r"Task kernelband\.(\w+)\[kb-(\d+)-(\d+)\] received")


@dataclass
class RedisServer:
    """A redis-server of the test's own, on a fixed port, that can be killed and restarted."""

    workdir: Path
    port: int = field(default_factory=free_port)
    process: ManagedProcess | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start (or restart) on the same port; data does not survive (no persistence)."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not on PATH; install Redis to run this test")
        self.starts += 1
        argv = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(self.workdir)]
        self.process = start_process(f"redis-{self.port}-{self.starts}", argv, {}, self.workdir)
        wait_for(self.ping, 20, f"redis-server on port {self.port}", processes=(self.process,))

    def ping(self) -> bool:
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        except redis.exceptions.ConnectionError:
            return False
        finally:
            client.close()

    def kill9(self) -> None:
        if self.process is not None:
            self.process.kill9()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate(timeout_s=5)


def terminate_backends(database_url: str) -> int:
    """pg_terminate_backend every other connection to this database; returns how many."""
    url = make_url(normalize_url(database_url))
    name = url.database
    admin = create_engine(url.set(database="postgres"), poolclass=NullPool,
                          isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            return len(conn.execute(text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = :name AND pid <> pg_backend_pid()"), {"name": name}).all())
    finally:
        admin.dispose()


def received_tasks(worker: ManagedProcess) -> list[tuple[str, int, int]]:
    """(kind, attempt id, try) of every task the worker's log says it received."""
    return [(m[1], int(m[2]), int(m[3])) for m in RECEIVED.finditer(worker.log_tail(10**7))]


def kill_on_receipt(worker: ManagedProcess, kind: str, skip: set[int],
                    timeout_s: float) -> int | None:
    """kill -9 `worker` the moment it receives a `kind` task not in `skip`; the attempt id."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and worker.alive():
        for got_kind, attempt_id, _try in received_tasks(worker):
            if got_kind == kind and attempt_id not in skip:
                worker.kill9()
                return attempt_id
        time.sleep(0.02)
    return None


@dataclass(frozen=True)
class Ledger:
    """What a job's rewards look like from three independent records."""

    finished_pulls: int  # pull_finished events
    distinct_decisions: int  # decisions among them
    duplicate_decisions: int  # decisions finished more than once (must be 0)
    lost_pulls: int  # selected pulls never finished nor failed (must be 0 once finished)
    event_reward_sum: float  # rewards of strategy pulls, from events
    arm_reward_sum: float  # sum(n * mu) over arms minus the prior, from the policy state
    arm_pulls: float  # sum(n) over arms minus the prior
    strategy_pulls: int  # pull_finished events whose decision named a strategy
    open_attempts: int
    measurements_per_candidate_max: int
    iterations_done: int
    policy_t: int


def reward_ledger(factory: sessionmaker[Session], job_id: int) -> Ledger:
    """Compare the policy's arm statistics with the rewards recorded in the job's events."""
    with session_scope(factory) as session:
        events = session.execute(select(Event.kind, Event.payload).where(
            Event.job_id == job_id, Event.kind.in_(("pull_selected", "pull_finished")))).all()
        tracks = session.scalars(select(Track).where(Track.job_id == job_id)).all()
        open_attempts = int(session.scalar(select(func.count()).select_from(Attempt).where(
            Attempt.job_id == job_id, Attempt.state.in_(OPEN_STATES))) or 0)
        per_candidate = session.execute(
            select(Measurement.candidate_id, func.count())
            .join(Candidate, Candidate.id == Measurement.candidate_id)
            .join(Track, Track.id == Candidate.track_id).where(Track.job_id == job_id)
            .group_by(Measurement.candidate_id)).all()
        states = [t.policy_state or {} for t in tracks]
        done = sum(t.iterations_done for t in tracks)
    strategy_of = {p["decision_id"]: p.get("strategy") for k, p in events if k == "pull_selected"}
    finished = [p for k, p in events if k == "pull_finished"]
    counts = Counter(p["decision"] for p in finished)
    strategy_rewards = [float(p["reward"]) for p in finished if strategy_of.get(p["decision"])]
    arm_sum = arm_n = prior = 0.0
    for state in states:
        for n_row, mu_row in zip(state.get("arm_n", []), state.get("arm_mu", []), strict=True):
            arm_n += sum(n_row)
            arm_sum += sum(n * mu for n, mu in zip(n_row, mu_row, strict=True))
            prior += len(n_row)  # each arm starts at n=1, mu=0.5
    return Ledger(
        finished_pulls=len(finished), distinct_decisions=len(counts),
        duplicate_decisions=sum(1 for c in counts.values() if c > 1),
        lost_pulls=len(set(strategy_of) - set(counts)),
        event_reward_sum=sum(strategy_rewards), arm_reward_sum=arm_sum - 0.5 * prior,
        arm_pulls=arm_n - prior, strategy_pulls=len(strategy_rewards),
        open_attempts=open_attempts,
        measurements_per_candidate_max=max((int(c) for _, c in per_candidate), default=0),
        iterations_done=done, policy_t=sum(int(s.get("t", 0)) for s in states))


def assert_consistent(ledger: Ledger) -> None:
    """Every selected pull finished once; arm statistics equal the sum of ingested rewards."""
    assert ledger.duplicate_decisions == 0, f"a reward was counted twice: {ledger}"
    assert ledger.lost_pulls == 0, f"a selected pull never finished: {ledger}"
    assert ledger.open_attempts == 0, f"attempts left open: {ledger}"
    assert ledger.measurements_per_candidate_max <= 1, f"a candidate measured twice: {ledger}"
    assert ledger.finished_pulls == ledger.iterations_done == ledger.policy_t, ledger
    assert abs(ledger.arm_pulls - ledger.strategy_pulls) < 1e-9, ledger
    assert abs(ledger.arm_reward_sum - ledger.event_reward_sum) < 1e-6, ledger


def wait_job_done(factory: sessionmaker[Session], job_id: int) -> bool:
    """True when the job reached a final status."""
    from tests.utils.processes import job_status

    return job_status(factory, job_id) in ("completed", "cancelled", "failed")


def count_attempts(factory: sessionmaker[Session], job_id: int, kind: str | None = None) -> int:
    """Attempts of the job that are done (of one kind when given)."""
    with session_scope(factory) as session:
        query = select(func.count()).select_from(Attempt).where(
            Attempt.job_id == job_id, Attempt.state == "done")
        if kind:
            query = query.where(Attempt.kind == kind)
        return int(session.scalar(query) or 0)


def subprocess_ok(argv: list[str], env: dict[str, str], cwd: Path) -> str:
    """Run a CLI command; its stdout, or an AssertionError with its output."""
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout
