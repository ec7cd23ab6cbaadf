"""Bounded scheduler passes: at most `limit` new pulls per pass, and no job waits for ever."""

from __future__ import annotations

import time
from collections import Counter

from scheduling_fakes import FAKE_TASKS, make_job
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import Attempt
from kernelband.db.session import session_scope
from kernelband.scheduling.dispatch import InboxDispatcher, TaskMessage
from kernelband.scheduling.pipeline import EngineContext, dispatch_pending, fenced, step
from kernelband.scheduling.selection import TimeBudget, select_pulls
from tests.utils.sql_log import sent_statements


class BaselineOnlyDispatcher(InboxDispatcher):
    """Answers profile tasks (here only baselines) at once and keeps every generate in flight."""

    def submit(self, task: TaskMessage) -> str:
        if task.kind == "profile":
            self.deliver(task.attempt_id, FAKE_TASKS["profile"](task.payload))
        return task.task_id


def _running(factory: sessionmaker[Session], jobs: int,
             parallelism: int) -> tuple[EngineContext, list[int]]:
    ids = [make_job(factory, budget_iterations=50, parallelism=parallelism, seed=i)
           for i in range(jobs)]
    ctx = EngineContext(factory, BaselineOnlyDispatcher(),
                        Settings(max_in_flight_per_team=10_000, max_pulls_per_pass=0))
    step(ctx)  # jobs start; baselines are sent and answered
    step(ctx)  # baselines applied: every track runs
    return ctx, ids


def _pulls_per_job(factory: sessionmaker[Session]) -> Counter[int]:
    with session_scope(factory) as session:
        rows = session.execute(select(Attempt.job_id, func.count(Attempt.id))
                               .where(Attempt.kind == "generate").group_by(Attempt.job_id))
        return Counter({int(job): int(count) for job, count in rows})


def test_a_pass_selects_at_most_its_limit(sqlite_factory: sessionmaker[Session]) -> None:
    ctx, _ = _running(sqlite_factory, jobs=5, parallelism=3)
    with fenced(ctx) as session:
        assert select_pulls(session, ctx.clock(), limit=4) == 4
    assert dispatch_pending(ctx, limit=3) == 3  # the oldest first; the rest next pass
    assert dispatch_pending(ctx, limit=3) == 1


def test_jobs_with_fewer_pulls_in_flight_are_served_first(
        sqlite_factory: sessionmaker[Session]) -> None:
    ctx, jobs = _running(sqlite_factory, jobs=4, parallelism=3)
    for passes in range(1, 5):
        with fenced(ctx) as session:
            assert select_pulls(session, ctx.clock(), limit=3) == 3
        counts = _pulls_per_job(sqlite_factory)
        per_job = [counts.get(job_id, 0) for job_id in jobs]
        assert sum(per_job) == 3 * passes
        assert max(per_job) - min(per_job) <= 1, per_job  # oldest-first alone starves the 4th
    assert sorted(_pulls_per_job(sqlite_factory).values()) == [3, 3, 3, 3]  # every slot used


def test_a_job_whose_other_track_is_full_still_counts_its_pulls(
        db_factory: sessionmaker[Session]) -> None:
    """Job rank counts every running track's pulls, also those of a track with no free slot."""
    two_targets = make_job(db_factory, targets=("cpu", "h100"), budget_iterations=50,
                           parallelism=2, seed=1)
    one_target = make_job(db_factory, budget_iterations=50, parallelism=2, seed=2)
    ctx = EngineContext(db_factory, BaselineOnlyDispatcher(),
                        Settings(max_in_flight_per_team=10_000, max_pulls_per_pass=0))
    step(ctx)
    step(ctx)
    with fenced(ctx) as session:  # the two-target job's first track fills up (2), the other job 1
        assert select_pulls(session, ctx.clock(), limit=3) == 3
    assert _pulls_per_job(db_factory) == Counter({two_targets: 2, one_target: 1})
    with fenced(ctx) as session:
        assert select_pulls(session, ctx.clock(), limit=1) == 1
    # the one-target job (1 in flight) goes before the two-target one (2 in flight, one full track)
    assert _pulls_per_job(db_factory) == Counter({two_targets: 2, one_target: 2})


def test_a_pass_stopped_at_its_bound_sends_its_pulls_and_the_next_serves_the_rest(
        sqlite_factory: sessionmaker[Session]) -> None:
    """A step selects up to `max_pulls_per_pass`, says more is waiting, and sends every pull's
    generate task; the next step serves the remaining slots."""
    bound, slots = 6, 9
    for seed in range(slots):
        make_job(sqlite_factory, budget_iterations=50, parallelism=1, seed=seed)
    ctx = EngineContext(sqlite_factory, BaselineOnlyDispatcher(),
                        Settings(max_in_flight_per_team=10_000, max_job_starts_per_team=slots,
                                 max_pulls_per_pass=bound, max_dispatch_per_pass=3 * bound))
    step(ctx)  # jobs start; baselines are sent and answered
    report = step(ctx)  # baselines applied: every track has one free slot
    assert (report.selected, report.dispatched, report.more_waiting) == (bound, bound, True)
    report = step(ctx)
    assert (report.selected, report.dispatched) == (slots - bound, slots - bound)
    assert sum(_pulls_per_job(sqlite_factory).values()) == slots


def test_housekeeping_waits_while_passes_run_back_to_back(
        sqlite_factory: sessionmaker[Session]) -> None:
    """After a pass that stopped at a bound, queued jobs start (and leases expire, tracks
    finish) only once the housekeeping interval has passed; after a pass that did not, at
    once."""
    make_job(sqlite_factory, budget_iterations=50, parallelism=4, seed=1)
    ctx = EngineContext(sqlite_factory, BaselineOnlyDispatcher(),
                        Settings(max_in_flight_per_team=10_000, max_pulls_per_pass=2))
    assert step(ctx).started_jobs == 1
    assert step(ctx).more_waiting  # baseline applied; 2 of the 4 free slots selected
    make_job(sqlite_factory, budget_iterations=50, parallelism=4, seed=2)
    report = step(ctx)
    assert (report.started_jobs, report.selected, report.more_waiting) == (0, 2, True)
    assert ctx.housekeeping_at is not None
    ctx.housekeeping_at -= ctx.settings.housekeeping_interval_s  # the interval has passed
    assert step(ctx).started_jobs == 1
    ctx.back_to_back = False  # a pass that did not stop at a bound: no waiting
    assert ctx.housekeeping_due() and ctx.housekeeping_due()


def test_a_housekeeping_interval_holds_for_every_pass(
        sqlite_factory: sessionmaker[Session]) -> None:
    """With `housekeeping_s` (the leader's Settings.housekeeping_interval_s) queued jobs start
    at most that often, whether or not passes stop at a bound."""
    ctx = EngineContext(sqlite_factory, BaselineOnlyDispatcher(),
                        Settings(max_in_flight_per_team=10_000), housekeeping_s=60.0)
    make_job(sqlite_factory, budget_iterations=50, parallelism=1, seed=1)
    assert step(ctx).started_jobs == 1  # the first pass does its housekeeping
    make_job(sqlite_factory, budget_iterations=50, parallelism=1, seed=2)
    report = step(ctx)
    assert (report.started_jobs, report.more_waiting) == (0, False)
    assert ctx.housekeeping_at is not None
    ctx.housekeeping_at -= 60.0
    assert step(ctx).started_jobs == 1


def test_a_selection_out_of_time_serves_one_track_and_the_next_passes_the_rest(
        sqlite_factory: sessionmaker[Session]) -> None:
    """The time budget is checked after each track: a selection with no time to spend still
    serves the first track in the fair order (so passes always progress), and passes bounded
    that way serve every job in turn."""
    ctx, jobs = _running(sqlite_factory, jobs=4, parallelism=2)
    for passes in range(1, 5):
        budget = TimeBudget(0.0)
        with fenced(ctx) as session:
            assert select_pulls(session, ctx.clock(), budget=budget) == 2
        assert budget.spent
        per_job = sorted(_pulls_per_job(sqlite_factory).get(job_id, 0) for job_id in jobs)
        assert per_job == [0] * (4 - passes) + [2] * passes  # one more job each pass
    budget = TimeBudget(60.0)
    with fenced(ctx) as session:
        assert select_pulls(session, ctx.clock(), budget=budget) == 0
    assert not budget.spent


def test_the_time_budget_counts_from_the_first_choice_not_the_reads_before() -> None:
    """Reads of which tracks have free slots grow with the database; the budget is for
    choosing pulls, so it starts (again) when the choosing does."""
    budget = TimeBudget(0.05)
    _busy(0.06)  # as if the reads before had taken longer than the budget
    budget.start()
    assert not budget.over()
    _busy(0.06)
    assert budget.over() and budget.spent


def test_the_time_budget_counts_the_schedulers_own_time_not_other_processes() -> None:
    """On a core shared with other work, time this thread spends waiting for the core (or for
    anything else) does not shorten the selection: a pass does the same work however busy
    the machine is."""
    budget = TimeBudget(0.05)
    budget.start()
    time.sleep(0.06)  # not running: like a thread preempted by other processes
    assert not budget.over()
    _busy(0.06)
    assert budget.over()


def _busy(seconds: float) -> None:
    """Spend `seconds` of this thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_pass_out_of_selection_time_says_more_is_waiting(
        sqlite_factory: sessionmaker[Session]) -> None:
    """With the leader's time budget (`select_budget_s`) a pass that used it up stops
    selecting, sends what it selected and runs the next pass back to back; without a budget
    (embedded mode) one pass selects every free slot."""
    for seed in range(3):
        make_job(sqlite_factory, budget_iterations=50, parallelism=2, seed=seed)
    settings = Settings(max_in_flight_per_team=10_000, max_job_starts_per_team=3)
    ctx = EngineContext(sqlite_factory, BaselineOnlyDispatcher(), settings,
                        select_budget_s=1e-9)  # spent by the time the first track is served
    assert ctx.selection_budget() is not None
    step(ctx)  # jobs start; baselines are sent and answered
    report = step(ctx)  # baselines applied: three tracks with two free slots each
    assert (report.selected, report.dispatched, report.more_waiting) == (2, 2, True)
    ctx.select_budget_s = 0.0  # no time bound
    assert ctx.selection_budget() is None
    report = step(ctx)
    assert (report.selected, report.dispatched, report.more_waiting) == (4, 4, False)
    assert Settings().select_budget_ms > 0  # the leader's default bounds its passes


def test_a_time_bounded_pass_reads_no_track_row_beyond_the_running_tracks(
        sqlite_factory: sessionmaker[Session]) -> None:
    """A selection reads the running tracks once, with the columns it uses; the policy states
    are the ones the scheduler holds, so no track or job row is loaded per track served,
    however much of its time is left."""
    ctx, _ = _running(sqlite_factory, jobs=12, parallelism=1)
    for _ in range(4):  # a few jobs start per team and housekeeping pass
        ctx.housekeeping_at = None
        step(ctx)
    ctx.state_writeback_s = 3600.0  # kept hot: no state written back meanwhile
    engine = sqlite_factory.kw["bind"]
    for budget, served in ((TimeBudget(0.0), 1), (TimeBudget(60.0), 11), (None, 0)):
        with sent_statements(engine) as sent, fenced(ctx) as session:
            assert select_pulls(session, ctx.clock(), budget=budget) == served
        reads = [" ".join(s.split()) for s in sent
                 if s.lstrip().upper().startswith(("SELECT", "WITH"))]
        reads = [s for s in reads if "FROM tracks" in s or "FROM jobs" in s]
        assert len(reads) == 1 and reads[0].startswith("WITH"), reads
