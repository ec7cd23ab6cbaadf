"""The leader's hot policy states: kept in memory, written back at intervals, rebuilt from the
stored state plus the event log by a new leader, with every reward applied exactly once."""

from __future__ import annotations

from scheduling_fakes import FAKE_TASKS, make_job
from sqlalchemy import event as sa_event
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import Event, Track
from kernelband.db.session import session_scope
from kernelband.scheduling.dispatch import InlineDispatcher
from kernelband.scheduling.lifecycle import job_is_finished
from kernelband.scheduling.pipeline import (
    EngineContext,
    fenced,
    ingest_batch,
    step,
    write_back_states,
)
from kernelband.scheduling.state import EVENT_SEQ, load_state
from kernelband.scheduling.state_cache import clear_cache, dirty_tracks
from tests.utils.faults import assert_consistent, reward_ledger

NEVER_DUE_S = 3600.0  # after its first write, a track's state is written back only when it stops


def hot_context(factory: sessionmaker[Session], writeback_s: float = NEVER_DUE_S) -> EngineContext:
    return EngineContext(factory, InlineDispatcher(FAKE_TASKS), Settings(),
                         state_writeback_s=writeback_s)


def hot_and_stored(factory: sessionmaker[Session], job_id: int) -> tuple[dict, dict, int]:
    """The state this process holds, the state stored in the track row (with the event number
    it was written at) and the job's last event number."""
    with session_scope(factory) as session:
        track = session.scalars(select(Track).where(Track.job_id == job_id)).one()
        hot = load_state(track).to_dict()
        stored = dict(track.policy_state or {})
        last = session.scalar(select(func.max(Event.seq)).where(Event.job_id == job_id))
    return hot, stored, int(last or 0)


def run_until(ctx: EngineContext, job_id: int, pulls_done: int) -> None:
    """Passes until the leader's state counts `pulls_done` finished pulls (the track row's
    counters are written with the state, so they lag like it)."""
    for _ in range(100):
        step(ctx)
        with session_scope(ctx.factory) as session:
            track = session.scalars(select(Track).where(Track.job_id == job_id)).one()
            done = load_state(track).t if track.policy_state is not None else 0
        if done >= pulls_done:
            return
    raise AssertionError(f"job {job_id} did not reach {pulls_done} finished pulls")


def test_a_leader_keeps_states_in_memory_between_write_backs(
        db_factory: sessionmaker[Session]) -> None:
    ctx = hot_context(db_factory)
    job_id = make_job(db_factory, budget_iterations=20, parallelism=3)
    run_until(ctx, job_id, 6)
    hot, stored, last = hot_and_stored(db_factory, job_id)
    assert hot["t"] >= 6 and stored["t"] < hot["t"]  # the row still holds the baseline's state
    assert stored[EVENT_SEQ] < last
    with session_scope(db_factory) as session:
        assert dirty_tracks(session) != []


def test_a_new_leader_rebuilds_the_exact_state_from_the_rows_and_the_events(
        db_factory: sessionmaker[Session]) -> None:
    ctx = hot_context(db_factory)
    job_id = make_job(db_factory, budget_iterations=30, parallelism=3)
    run_until(ctx, job_id, 9)
    hot, stored, _ = hot_and_stored(db_factory, job_id)
    clear_cache()  # a new leader: nothing in memory
    rebuilt, _, _ = hot_and_stored(db_factory, job_id)
    assert stored["t"] < hot["t"]  # so the rebuild replayed pulls selected and finished
    assert rebuilt == hot  # RNG, counters, arm statistics, pending decisions and frontier


def test_handing_over_writes_every_held_state_back(db_factory: sessionmaker[Session]) -> None:
    ctx = hot_context(db_factory)
    job_id = make_job(db_factory, budget_iterations=20, parallelism=2)
    run_until(ctx, job_id, 4)
    assert write_back_states(ctx) == 1
    hot, stored, last = hot_and_stored(db_factory, job_id)
    assert stored[EVENT_SEQ] == last and stored["t"] == hot["t"] and stored["rng"] == hot["rng"]
    with session_scope(db_factory) as session:
        assert dirty_tracks(session) == []
    assert write_back_states(ctx) == 0


def test_a_write_back_is_due_after_its_interval(db_factory: sessionmaker[Session]) -> None:
    ctx = hot_context(db_factory, writeback_s=1e-9)  # always due: every change is written
    job_id = make_job(db_factory, budget_iterations=20, parallelism=2)
    run_until(ctx, job_id, 4)
    hot, stored, last = hot_and_stored(db_factory, job_id)
    assert stored["t"] == hot["t"] and stored[EVENT_SEQ] == last


def test_a_leader_killed_between_a_batch_and_its_write_back_loses_and_doubles_nothing(
        db_factory: sessionmaker[Session]) -> None:
    """The batch's rows are committed, the state it changed lives only in the killed process,
    and results are in flight: the next leader rebuilds the state, absorbs the redelivered
    results, and every reward counts once."""
    ctx = hot_context(db_factory)
    job_id = make_job(db_factory, budget_iterations=18, parallelism=3)
    run_until(ctx, job_id, 3)
    step(ctx)  # sends more pulls: their results wait in the dispatcher
    in_flight = ctx.dispatcher.drain()
    assert in_flight
    applied, _ = ingest_batch(ctx, in_flight[: len(in_flight) // 2 + 1])  # committed, kept hot
    assert applied > 0
    sent = ctx.dispatcher.drain()  # the attempts the batch led to, sent with its commit
    _, stored, last = hot_and_stored(db_factory, job_id)
    assert stored[EVENT_SEQ] < last  # killed here: the batch is in, its state not written back
    clear_cache()
    successor = hot_context(db_factory)
    with fenced(successor) as session:  # what the killed leader held is rebuilt, not read
        track = session.scalars(select(Track).where(Track.job_id == job_id)).one()
        finished = int(session.scalar(select(func.count(Event.id)).where(
            Event.job_id == job_id, Event.kind == "pull_finished")) or 0)
        assert track.iterations_done < finished  # the row's counters lag like its state
        assert load_state(track).t == finished
    applied_again, ignored = ingest_batch(successor, in_flight)  # the broker redelivers all
    assert ignored >= applied and applied_again == len(in_flight) - applied
    ingest_batch(successor, sent)  # they were in the broker: their results come in too
    for _ in range(200):
        step(successor)
        if job_is_finished(db_factory, job_id):
            break
    assert job_is_finished(db_factory, job_id)
    ledger = reward_ledger(db_factory, job_id)
    assert_consistent(ledger)
    assert ledger.finished_pulls == 18 and ledger.duplicate_decisions == 0


def test_writing_back_many_states_reads_no_job_one_by_one(
        db_factory: sessionmaker[Session]) -> None:
    """The jobs' last event numbers come with the tracks: the reads of a write-back do not
    grow with the number of tracks written, and each stored number is the job's last."""
    def statements_of_write_back(jobs: int) -> tuple[int, int]:
        clear_cache()
        ctx = hot_context(db_factory)
        ids = [make_job(db_factory, budget_iterations=20, parallelism=2, seed=i)
               for i in range(jobs)]
        for job_id in ids:
            run_until(ctx, job_id, 2)
        seen: list[str] = []
        engine = db_factory.kw["bind"]
        record = lambda *args: seen.append(str(args[2]).split(None, 1)[0].upper())  # noqa: E731
        sa_event.listen(engine, "before_cursor_execute", record)
        try:
            written = write_back_states(ctx)
        finally:
            sa_event.remove(engine, "before_cursor_execute", record)
        for job_id in ids:
            _, stored, last = hot_and_stored(db_factory, job_id)
            assert stored[EVENT_SEQ] == last
        return written, seen.count("SELECT")

    few, many = statements_of_write_back(2), statements_of_write_back(6)
    assert (few[0], many[0]) == (2, 6)
    assert many[1] == few[1] == 1
