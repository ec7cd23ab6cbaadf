"""A worker killed mid-task (short lease; default lease, noticed by its silence) and a result
delivered three times: each attempt counts once."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband import public_ids
from kernelband.config import Settings
from kernelband.db.models import Attempt, Event, Measurement, Worker
from kernelband.db.session import session_scope
from services.api.fleet import fleet_worker
from services.scheduler.dispatcher import RESULTS_UNACKED_KEYS
from services.worker.app import app as celery_app
from services.worker.messages import ResultMessage, publish
from services.worker.queues import RESULTS_QUEUE
from tests.integration.conftest import POISON_DATABASE_URL
from tests.utils.faults import assert_consistent, kill_on_receipt, reward_ledger
from tests.utils.processes import (
    ManagedProcess,
    claim_redis_db,
    redis_base_url,
    release_redis_db,
    service_env,
    start_scheduler,
    start_worker,
    wait_finished,
    wait_for,
)

LEASE_S = "8"  # short: the lost attempt comes back within seconds


@pytest.fixture
def private_broker() -> Iterator[str]:
    """A Redis database of this test alone, so no shared worker takes its tasks."""
    db = claim_redis_db()
    yield f"{redis_base_url()}/{db}"
    release_redis_db(db)


def test_worker_killed_during_profile_is_redispatched_and_counted_once(
        factory: sessionmaker[Session], make_job: Callable[..., int], postgres_url: str,
        private_broker: str, log_dir: Path, tally: Counter[str]) -> None:
    worker_env = service_env(POISON_DATABASE_URL, private_broker, private_broker,
                             KERNELBAND_HEARTBEAT_INTERVAL_S="1")
    sched_env = service_env(postgres_url, private_broker, private_broker,
                            KERNELBAND_POLL_INTERVAL_S="0.1", KERNELBAND_LEASE_S=LEASE_S)
    llm = start_worker("wk-llm", "llm", worker_env, log_dir)
    cpu = start_worker("wk-cpu-1", "cpu", worker_env, log_dir)
    scheduler = start_scheduler("wk-scheduler", sched_env, log_dir)
    started = [llm, cpu, scheduler]
    try:
        job_id = make_job("vector_add", ("cpu",), budget_iterations=3, parallelism=1)
        victim = kill_on_receipt(cpu, "profile", skip=set(), timeout_s=120)
        assert victim is not None, f"no profile task reached the worker\n{cpu.log_tail()}"
        tally["faults_injected"] += 1
        tally["worker_kill9"] += 1
        replacement = start_worker("wk-cpu-2", "cpu", worker_env, log_dir)
        started.append(replacement)
        assert wait_finished(factory, job_id, (scheduler, replacement, llm), 240) == "completed"
        tally["jobs_completed"] += 1
        with session_scope(factory) as session:
            attempt = session.get_one(Attempt, victim)
            measured = session.scalar(select(func.count()).select_from(Measurement).where(
                Measurement.candidate_id == attempt.candidate_id))
            retries = session.scalars(select(Event.payload).where(
                Event.job_id == job_id, Event.kind == "attempt_retry")).all()
            state, tries = attempt.state, attempt.tries
        assert state == "done" and tries >= 2, f"attempt {victim}: {state}, tries {tries}"
        assert any(p["attempt"] == victim for p in retries)  # re-dispatched after its lease
        assert measured == 1  # exactly one measurement for the killed attempt's candidate
        ledger = reward_ledger(factory, job_id)
        tally["rewards_duplicated"] += ledger.duplicate_decisions
        tally["rewards_lost"] += ledger.lost_pulls
        assert_consistent(ledger)
    finally:
        for process in started:
            process.terminate()


def test_a_killed_worker_is_noticed_by_its_silence_and_its_task_sent_again_in_seconds(
        factory: sessionmaker[Session], make_job: Callable[..., int], postgres_url: str,
        private_broker: str, log_dir: Path, tally: Counter[str]) -> None:
    """Default lease (300 s) and heartbeat interval: the job still completes within 60 s of a
    kill -9 mid-attempt, because the leader counts the silent worker gone after 3 missed
    beats and sends its try again; the dead delivery leaves Redis's unacked set."""
    worker_env = service_env(POISON_DATABASE_URL, private_broker, private_broker)
    sched_env = service_env(postgres_url, private_broker, private_broker,
                            KERNELBAND_POLL_INTERVAL_S="0.1")
    llm = start_worker("gone-llm", "llm", worker_env, log_dir)
    cpu = start_worker("gone-cpu-1", "cpu", worker_env, log_dir)
    scheduler = start_scheduler("gone-scheduler", sched_env, log_dir)
    started = [llm, cpu, scheduler]
    try:
        job_id = make_job("vector_add", ("cpu",), budget_iterations=1, parallelism=1)
        victim = kill_on_receipt(cpu, "profile", skip=set(), timeout_s=180)  # the baseline
        killed_at = time.monotonic()
        assert victim is not None, f"no profile task reached the worker\n{cpu.log_tail()}"
        tally["faults_injected"] += 1
        tally["worker_kill9"] += 1
        replacement = start_worker("gone-cpu-2", "cpu", worker_env, log_dir)
        started.append(replacement)
        assert wait_finished(factory, job_id, (scheduler, replacement, llm), 60) == "completed"
        took_s = time.monotonic() - killed_at
        tally["jobs_completed"] += 1
        with session_scope(factory) as session:
            attempt = session.get_one(Attempt, victim)
            dead = session.scalars(select(Worker).where(Worker.name.like("gone-cpu-1@%"))).one()
            # The view names the attempt the worker died holding by its public id, which the
            # API's middleware encodes per request; here the test stands in for the request.
            token = public_ids.activate(public_ids.for_session(session))
            try:
                view = fleet_worker(dead, Settings())
            finally:
                public_ids.deactivate(token)
        assert attempt.state == "done" and attempt.tries == 2, (attempt.state, attempt.tries)
        assert view.status == "gone" and view.gone_at is not None and view.isolation
        ledger = reward_ledger(factory, job_id)
        tally["rewards_duplicated"] += ledger.duplicate_decisions
        tally["rewards_lost"] += ledger.lost_pulls
        assert_consistent(ledger)
        client = redis.Redis.from_url(private_broker)
        leftover = client.hlen("unacked")  # kombu's unacked tasks: the dead delivery is gone
        client.close()
        assert leftover == 0
        print(f"worker kill -9 to job completed: {took_s:.1f} s (lease 300 s)")
    finally:
        for process in started:
            process.terminate()


def test_a_result_delivered_three_times_is_applied_once(
        factory: sessionmaker[Session], make_job: Callable[..., int], broker_url: str,
        workers: list[ManagedProcess], schedulers: Callable[[str], ManagedProcess],
        tally: Counter[str]) -> None:
    job_id = make_job("vector_add", ("cpu",), budget_iterations=2, parallelism=2)
    scheduler = schedulers("a")
    assert wait_finished(factory, job_id, (scheduler, *workers)) == "completed"
    tally["jobs_completed"] += 1
    with session_scope(factory) as session:
        done = session.scalars(select(Attempt).where(
            Attempt.job_id == job_id, Attempt.state == "done")).all()
        replays = [ResultMessage(attempt_id=a.id, kind=a.kind, result=a.result or {})
                   for a in done]
    before = reward_ledger(factory, job_id)
    with celery_app.connection_for_write(broker_url) as connection:
        for replay in replays:
            for _ in range(3):
                publish(connection, replay)
    tally["faults_injected"] += 3 * len(replays)
    tally["duplicate_deliveries"] += 3 * len(replays)
    client = redis.Redis.from_url(broker_url)
    wait_for(lambda: client.llen(RESULTS_QUEUE) == 0
             and client.zcard(RESULTS_UNACKED_KEYS["unacked_index_key"]) == 0,
             30, "the scheduler to consume every copy", processes=(scheduler,))
    client.close()
    after = reward_ledger(factory, job_id)
    assert after == before  # nothing re-applied: same rewards, measurements, arm statistics
    assert_consistent(after)
