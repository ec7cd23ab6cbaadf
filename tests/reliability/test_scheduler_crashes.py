"""kill -9 of the scheduler at many points of a running job, and between a batch's insert and
its policy state's write-back: the next one finishes it and the bandit's arm statistics equal
the sum of the rewards that were ingested, once each."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.models import Event, LeaderEpoch, Track
from kernelband.db.session import session_scope
from kernelband.scheduling.state import EVENT_SEQ
from tests.utils.faults import assert_consistent, reward_ledger, wait_job_done
from tests.utils.processes import (
    ManagedProcess,
    job_status,
    start_scheduler,
    wait_finished,
    wait_for,
)

KILLS = 10
BUDGET = 24  # enough pulls that the job outlives every kill


def event_count(factory: sessionmaker[Session], job_id: int) -> int:
    with session_scope(factory) as session:
        return int(session.scalar(select(func.count()).select_from(Event)
                                  .where(Event.job_id == job_id)) or 0)


def test_scheduler_killed_at_ten_points_finishes_job_with_exact_rewards(
        factory: sessionmaker[Session], make_job: Callable[..., int],
        workers: list[ManagedProcess], schedulers: Callable[[str], ManagedProcess],
        tally: Counter[str]) -> None:
    job_id = make_job("vector_add", ("cpu",), budget_iterations=BUDGET, parallelism=2)
    kill_points: list[int] = []
    for index in range(KILLS):
        scheduler = schedulers(f"s{index}")
        target = event_count(factory, job_id) + 1  # each kill lands after new progress
        wait_for(lambda t=target: event_count(factory, job_id) >= t  # type: ignore[misc]
                 or wait_job_done(factory, job_id), 180, f"progress before kill {index}", processes=(scheduler, *workers))
        assert not wait_job_done(factory, job_id), f"job finished after only {index} kills"
        time.sleep((index % 3) * 0.15)  # vary the instant within the step
        kill_points.append(event_count(factory, job_id))
        scheduler.kill9()
        tally["faults_injected"] += 1
        tally["scheduler_kill9"] += 1
        assert job_status(factory, job_id) == "running"
    final = schedulers("final")
    assert wait_finished(factory, job_id, (final, *workers), timeout_s=240) == "completed"
    tally["jobs_completed"] += 1
    ledger = reward_ledger(factory, job_id)
    tally["rewards_duplicated"] += ledger.duplicate_decisions
    tally["rewards_lost"] += ledger.lost_pulls
    print(f"scheduler kill points (events seen): {kill_points}; ledger: {ledger}")
    assert_consistent(ledger)
    assert ledger.finished_pulls == BUDGET
    with session_scope(factory) as session:
        assert session.get_one(LeaderEpoch, 1).epoch >= KILLS + 1  # every restart took over


def written_behind(factory: sessionmaker[Session], job_id: int) -> tuple[int, int, int]:
    """(pulls finished, the stored state's `t`, events the stored state does not hold)."""
    with session_scope(factory) as session:
        track = session.scalars(select(Track).where(Track.job_id == job_id)).one_or_none()
        if track is None:  # the job has not started yet
            return 0, 0, 0
        stored = dict(track.policy_state or {})
        last = session.scalar(select(func.max(Event.seq)).where(Event.job_id == job_id)) or 0
        # Pulls finished as the log has them: the row's counters are written with the state.
        done = session.scalar(select(func.count(Event.id)).where(
            Event.job_id == job_id, Event.kind == "pull_finished")) or 0
        return done, int(stored.get("t", 0)), last - int(stored.get(EVENT_SEQ) or 0)


def test_leader_killed_between_batch_inserts_and_state_write_back_loses_nothing(
        factory: sessionmaker[Session], make_job: Callable[..., int],
        workers: list[ManagedProcess], scheduler_env: dict[str, str], log_dir: Path,
        schedulers: Callable[[str], ManagedProcess], tally: Counter[str]) -> None:
    """The leader writes its policy states back only when a track stops (an interval longer
    than the test), so when it is killed every batch it applied since the baseline is in
    Postgres while the state those batches changed lived only in its memory."""
    job_id = make_job("vector_add", ("cpu",), budget_iterations=8, parallelism=2)
    env = {**scheduler_env, "KERNELBAND_STATE_WRITEBACK_S": "3600"}
    hot = start_scheduler("hot-leader", env, log_dir)
    try:
        wait_for(lambda: written_behind(factory, job_id)[0] >= 3 or wait_job_done(factory, job_id),
                 240, "three pulls finished", processes=(hot, *workers))
        done, stored_t, events_behind = written_behind(factory, job_id)
        hot.kill9()
    finally:
        hot.terminate()
    tally["faults_injected"] += 1
    tally["scheduler_kill9"] += 1
    assert job_status(factory, job_id) == "running", "the job finished before the kill"
    assert stored_t < done and events_behind > 0, (done, stored_t, events_behind)
    successor = schedulers("successor")
    assert wait_finished(factory, job_id, (successor, *workers), timeout_s=240) == "completed"
    tally["jobs_completed"] += 1
    ledger = reward_ledger(factory, job_id)
    tally["rewards_duplicated"] += ledger.duplicate_decisions
    tally["rewards_lost"] += ledger.lost_pulls
    print(f"killed with {done} pulls finished, the stored state at t={stored_t}; {ledger}")
    assert_consistent(ledger)
    assert ledger.finished_pulls == 8
