"""kill -9 of the scheduler at many points of a running job: the next one finishes it and
the bandit's arm statistics equal the sum of the rewards that were ingested, once each."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.models import Event, LeaderEpoch
from kernelband.db.session import session_scope
from tests.utils.faults import assert_consistent, reward_ledger, wait_job_done
from tests.utils.processes import ManagedProcess, job_status, wait_finished, wait_for

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
