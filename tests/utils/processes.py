"""Start and stop real worker and scheduler processes for integration tests.

Each test run claims an empty Redis database number (with a claim key set NX) so that runs of
several engineers on one Redis never see each other's queues.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import redis
from sqlalchemy.orm import Session, sessionmaker

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TEST_REDIS_URL = "redis://127.0.0.1:6379"
CLAIM_KEY = "kernelband:test-claim"
# 0 and 1 are the defaults of a real deployment; every test that needs Redis claims one of the
# others (tests/conftest.py's redis_url, or a run's broker_url), so test processes running side
# by side never share a queue.
CLAIM_DBS = tuple(range(15, 1, -1))


class RedisUnavailableError(RuntimeError):
    """The test Redis server could not be reached."""


def redis_base_url() -> str:
    """Server URL (no database number) from KERNELBAND_TEST_REDIS_URL."""
    return os.environ.get("KERNELBAND_TEST_REDIS_URL", DEFAULT_TEST_REDIS_URL).rstrip("/")


def claim_redis_db(base_url: str | None = None, ttl_s: int = 3600) -> int:
    """Claim an empty database number on the test Redis; raises when none is free."""
    base = base_url or redis_base_url()
    for db in CLAIM_DBS:
        client = redis.Redis.from_url(f"{base}/{db}", socket_connect_timeout=3)
        try:
            if client.dbsize() == 0 and client.set(CLAIM_KEY, str(os.getpid()), nx=True, ex=ttl_s):
                return db
        except redis.exceptions.ConnectionError as exc:
            raise RedisUnavailableError(
                f"Redis is unreachable at {base} ({exc}); start Redis or set "
                "KERNELBAND_TEST_REDIS_URL to a reachable server"
            ) from exc
        finally:
            client.close()
    raise RedisUnavailableError(f"no empty Redis database among {list(CLAIM_DBS)} at {base}; "
                                "free one (FLUSHDB) or point KERNELBAND_TEST_REDIS_URL elsewhere")


def release_redis_db(db: int, base_url: str | None = None) -> None:
    """Empty a database this run claimed."""
    client = redis.Redis.from_url(f"{base_url or redis_base_url()}/{db}")
    try:
        client.flushdb()
    finally:
        client.close()


@contextmanager
def redis_db_url() -> Iterator[str]:
    """A Redis database of its own for the block (a URL), released after it."""
    db = claim_redis_db()
    try:
        yield f"{redis_base_url()}/{db}"
    finally:
        release_redis_db(db)


@dataclass
class ManagedProcess:
    """A child process whose output goes to a log file the test can show on failure."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    extra: dict[str, str] = field(default_factory=dict)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def kill9(self) -> None:
        """Kill the whole process group at once, as a crash would."""
        if self.alive():
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=30)

    def terminate(self, timeout_s: float = 20.0) -> int:
        """SIGTERM, then SIGKILL the process group if it does not exit in time."""
        if self.alive():
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=30)
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)  # leftover grandchildren (sandbox)
        return int(self.popen.returncode)


def service_env(database_url: str | None, broker_url: str, result_url: str,
                **extra: str) -> dict[str, str]:
    """Environment of a service child: the test's URLs, no inherited KERNELBAND_ settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELBAND_")}
    env.update({"KERNELBAND_BROKER_URL": broker_url, "KERNELBAND_RESULT_BACKEND_URL": result_url,
                "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1",
                "PYTHONPATH": str(REPO_ROOT)})
    if database_url is not None:
        env["KERNELBAND_DATABASE_URL"] = database_url
    env.update(extra)
    return env


def start_process(name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> ManagedProcess:
    """Start `argv` in its own process group with output to log_dir/name.log."""
    log_path = log_dir / f"{name}.log"
    with log_path.open("wb") as log:
        popen = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    return ManagedProcess(name, popen, log_path)


def start_worker(name: str, queues: str, env: dict[str, str], log_dir: Path,
                 concurrency: int = 1) -> ManagedProcess:
    """A real `celery -A services.worker.app worker` consuming `queues`."""
    argv = [sys.executable, "-m", "celery", "-A", "services.worker.app", "worker",
            "-Q", queues, "-c", str(concurrency), "-n", f"{name}@%h", "--loglevel", "INFO",
            "--without-gossip", "--without-mingle", "--without-heartbeat"]
    return start_process(name, argv, env, log_dir)


def start_scheduler(name: str, env: dict[str, str], log_dir: Path) -> ManagedProcess:
    """A real `python -m services.scheduler` process."""
    return start_process(name, [sys.executable, "-m", "services.scheduler", "--name", name],
                         env, log_dir)


def wait_for(predicate: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.2,
             processes: tuple[ManagedProcess, ...] = ()) -> None:
    """Poll `predicate()` until true; on timeout fail with `what` and the process logs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval_s)
    logs = "\n".join(f"--- {p.name} (alive={p.alive()}) ---\n{p.log_tail()}" for p in processes)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}\n{logs}")


def job_status(factory: sessionmaker[Session], job_id: int) -> str:
    """The job's status as the database has it now."""
    from kernelband.db import repository
    from kernelband.db.session import session_scope

    with session_scope(factory) as session:
        return repository.get_job(session, job_id).status


def wait_finished(factory: sessionmaker[Session], job_id: int,
                  processes: tuple[ManagedProcess, ...], timeout_s: float = 150.0) -> str:
    """Wait until the job is completed, cancelled or failed; returns that status."""
    wait_for(lambda: job_status(factory, job_id) in ("completed", "cancelled", "failed"),
             timeout_s, f"job {job_id} to finish", processes=processes)
    return job_status(factory, job_id)
