"""Redis restarted mid-job, Postgres connections dropped, two scheduler replicas: the job
completes, the API answers again, and the standby takes over within a measured bound."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import Attempt, Event, LeaderEpoch
from kernelband.db.session import make_engine, make_session_factory, session_scope
from services.api.app import create_app
from services.api.teams import create_token
from tests.integration.conftest import POISON_DATABASE_URL
from tests.utils.faults import (
    RedisServer,
    assert_consistent,
    count_attempts,
    reward_ledger,
    terminate_backends,
    wait_job_done,
)
from tests.utils.processes import (
    ManagedProcess,
    service_env,
    start_scheduler,
    start_worker,
    wait_finished,
    wait_for,
)

FAILOVER_BOUND_S = 15.0  # lock dies with the leader's connection; standby polls every 1 s


def _finish_checked(factory: sessionmaker[Session], job_id: int,
                    processes: tuple[ManagedProcess, ...], tally: Counter[str]) -> None:
    assert wait_finished(factory, job_id, processes, timeout_s=240) == "completed"
    tally["jobs_completed"] += 1
    ledger = reward_ledger(factory, job_id)
    tally["rewards_duplicated"] += ledger.duplicate_decisions
    tally["rewards_lost"] += ledger.lost_pulls
    assert_consistent(ledger)


def test_redis_restarted_mid_job_and_lost_messages_come_back_through_leases(
        factory: sessionmaker[Session], make_job: Callable[..., int], postgres_url: str,
        log_dir: Path, tmp_path: Path, tally: Counter[str]) -> None:
    server = RedisServer(tmp_path)
    server.start()
    workers_env = service_env(POISON_DATABASE_URL, server.url, server.url,
                              KERNELBAND_HEARTBEAT_INTERVAL_S="1")
    sched_env = service_env(postgres_url, server.url, server.url,
                            KERNELBAND_POLL_INTERVAL_S="0.1", KERNELBAND_LEASE_S="8")
    scheduler = start_scheduler("rr-scheduler", sched_env, log_dir)
    workers = {"llm": start_worker("rr-llm", "llm", workers_env, log_dir),
               "cpu": start_worker("rr-cpu", "cpu", workers_env, log_dir, concurrency=2)}
    restarts: list[ManagedProcess] = []
    try:
        job_id = make_job("vector_add", ("cpu",), budget_iterations=6, parallelism=2)
        wait_for(lambda: count_attempts(factory, job_id) >= 3, 120, "progress before the restart",
                 processes=(scheduler, *workers.values()))
        server.kill9()  # queued tasks, results and heartbeats in Redis are gone
        tally["faults_injected"] += 1
        tally["redis_kill9"] += 1
        time.sleep(3.0)
        server.start()  # same port, empty

        def supervised_done() -> bool:
            """Restart a worker that died, as docker-compose's restart policy would."""
            for queue, process in list(workers.items()):
                if not process.alive():
                    workers[queue] = start_worker(f"rr-{queue}-{len(restarts) + 2}", queue,
                                                  workers_env, log_dir, concurrency=2)
                    restarts.append(process)
            return wait_job_done(factory, job_id)

        wait_for(supervised_done, 240, "the job to finish after the Redis restart", 0.5,
                 processes=(scheduler, *workers.values()))
        tally["worker_restarts_after_broker_loss"] += len(restarts)
        print(f"redis restart: {len(restarts)} worker(s) died on the broker loss and were "
              f"restarted; retried attempts: {retried(factory, job_id)}")
        _finish_checked(factory, job_id, (scheduler, *workers.values()), tally)
        assert scheduler.alive(), "the scheduler died instead of reconnecting"
        assert lost_attempts(factory, job_id) == [], "attempts given up instead of recovered"
    finally:
        for process in (scheduler, *workers.values(), *restarts):
            process.terminate()
        server.stop()


def retried(factory: sessionmaker[Session], job_id: int) -> int:
    """How many attempts went back to the queue after their lease expired."""
    with session_scope(factory) as session:
        return len(session.scalars(select(Event.id).where(
            Event.job_id == job_id, Event.kind == "attempt_retry")).all())


def lost_attempts(factory: sessionmaker[Session], job_id: int) -> list[str]:
    """Reasons of attempts closed because every try was lost."""
    with session_scope(factory) as session:
        return [str(r) for r in session.scalars(select(Attempt.reason).where(
            Attempt.job_id == job_id, Attempt.reason.like("lost:%")))]


def test_dropped_postgres_connections_scheduler_and_api_recover(
        factory: sessionmaker[Session], make_job: Callable[..., int], postgres_url: str,
        workers: list[ManagedProcess], schedulers: Callable[[str], ManagedProcess],
        tally: Counter[str]) -> None:
    engine = make_engine(postgres_url)
    api_factory = make_session_factory(engine)
    with session_scope(api_factory) as session:
        token = create_token(session, "pg-drop")
    app = create_app(Settings(broker_url=""), session_factory=api_factory, embedded=True)
    headers = {"Authorization": f"Bearer {token}"}
    scheduler = schedulers("a")
    try:
        with TestClient(app) as client:
            assert client.get("/v1/jobs", headers=headers).status_code == 200  # pool warmed
            job_id = make_job("vector_add", ("cpu",), budget_iterations=4, parallelism=2)
            for round_ in range(3):
                wait_for(lambda r=round_: count_attempts(factory, job_id) >= r + 1  # type: ignore[misc]
                         or scheduler.popen.poll() is not None, 120, "progress",
                         processes=(scheduler, *workers))
                dropped = terminate_backends(postgres_url)
                tally["faults_injected"] += 1
                tally["postgres_connections_dropped"] += dropped
                response = client.get("/v1/jobs", headers=headers)  # first request after the drop
                assert response.status_code == 200, response.text
            _finish_checked(factory, job_id, (scheduler, *workers), tally)
            assert scheduler.alive(), f"the scheduler died:\n{scheduler.log_tail()}"
    finally:
        engine.dispose()


def test_two_replicas_one_acts_and_standby_takes_over_after_kill9(
        factory: sessionmaker[Session], make_job: Callable[..., int],
        workers: list[ManagedProcess], schedulers: Callable[[str], ManagedProcess],
        tally: Counter[str]) -> None:
    replicas = {"a": schedulers("a"), "b": schedulers("b")}

    def leader() -> tuple[int, str]:
        with session_scope(factory) as session:
            row = session.get(LeaderEpoch, 1)
            return (row.epoch, row.holder) if row else (0, "")

    wait_for(lambda: leader()[0] >= 1, 60, "a leader", processes=tuple(replicas.values()))
    epoch, holder = leader()
    job_id = make_job("vector_add", ("cpu",), budget_iterations=4, parallelism=2)
    wait_for(lambda: count_attempts(factory, job_id) >= 2, 120, "progress",
             processes=(*replicas.values(), *workers))
    assert leader() == (epoch, holder)  # the standby never acted while the leader lived
    lead_key = holder.rsplit("-", 1)[1]
    killed_at = time.monotonic()
    replicas[lead_key].kill9()
    tally["faults_injected"] += 1
    tally["leader_kill9"] += 1
    wait_for(lambda: leader()[0] == epoch + 1, 60, "the standby to take over",
             interval_s=0.05, processes=tuple(replicas.values()))
    takeover_s = time.monotonic() - killed_at
    print(f"failover: standby took over {takeover_s:.2f}s after kill -9 of the leader")
    tally["failover_ms_max"] = max(tally["failover_ms_max"], int(takeover_s * 1000))
    assert leader()[1] != holder and takeover_s < FAILOVER_BOUND_S
    _finish_checked(factory, job_id, (*replicas.values(), *workers), tally)
