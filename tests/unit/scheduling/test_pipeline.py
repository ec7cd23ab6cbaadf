"""Scheduler steps on real SQLite and Postgres databases with deterministic task bodies."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
from scheduling_fakes import (
    FAKE_TASKS,
    TOKENS_PER_GENERATION,
    context,
    decisions,
    fake_generate,
    make_job,
    run_to_end,
)
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db import repository
from kernelband.db.models import ArmStat, Attempt, Candidate, Job, Track
from kernelband.db.session import session_scope
from kernelband.scheduling.attempts import ACTIVE_ATTEMPT_STATES, send_on_commit
from kernelband.scheduling.dispatch import InboxDispatcher, InlineDispatcher, TaskMessage
from kernelband.scheduling.fencing import FencingError, claim_leadership
from kernelband.scheduling.pipeline import EngineContext, fenced, ingest_result, step
from kernelband.scheduling.state import load_state


class DroppingDispatcher(InboxDispatcher):
    """Loses every task of the given kinds (a dead worker); runs the others inline."""

    def __init__(self, drop: set[str]) -> None:
        super().__init__()
        self.drop, self.sent = drop, []  # type: ignore[var-annotated]

    def submit(self, task: TaskMessage) -> str:
        self.sent.append(task)
        if task.kind not in self.drop:
            self.deliver(task.attempt_id, FAKE_TASKS[task.kind](task.payload))
        return task.task_id


def attempts_by_kind(session: Session, job_id: int) -> dict[str, int]:
    rows = session.execute(select(Attempt.kind, func.count()).where(Attempt.job_id == job_id)
                           .group_by(Attempt.kind)).all()
    return {kind: count for kind, count in rows}


def test_job_runs_to_completion(db_factory: sessionmaker[Session]) -> None:
    job_id = make_job(db_factory, budget_iterations=6, parallelism=2)
    run_to_end(context(db_factory), job_id)
    with session_scope(db_factory) as session:
        job, track = session.get_one(Job, job_id), repository.job_tracks(session, job_id)[0]
        assert job.status == "completed" and job.finished_at is not None
        assert track.iterations_dispatched == track.iterations_done == 6
        assert track.held_out in ("passed", "original") and track.best_label == "estimated"
        assert track.best_speedup is not None and track.best_speedup >= 1.0
        kinds = attempts_by_kind(session, job_id)
        assert kinds["generate"] == 6 and kinds["profile"] >= 1
        assert job.tokens_used == 6 * TOKENS_PER_GENERATION
        seqs = [e.seq for e in repository.events_after(session, job_id)]
        assert seqs == list(range(1, len(seqs) + 1))
        assert int(session.scalar(select(func.count(ArmStat.id))) or 0) >= 6


def test_same_result_twice_is_applied_once(db_factory: sessionmaker[Session]) -> None:
    job_id = make_job(db_factory, budget_iterations=2)
    ctx = context(db_factory)
    step(ctx)  # baseline
    step(ctx)  # baseline ingested, first generate dispatched and answered inline
    with session_scope(db_factory) as session:
        attempt = session.scalars(select(Attempt).where(Attempt.kind == "generate")).one()
        payload = TaskMessage(attempt.id, "generate", "llm", {}).to_dict()
    message = next(m for m in ctx.dispatcher.submitted if m.kind == "generate")  # type: ignore[attr-defined]
    result = fake_generate(message.payload)
    step(ctx)  # the original delivery
    with session_scope(db_factory) as session:
        assert ingest_result(session, payload["attempt_id"], result, 3) is False
    ctx.dispatcher.deliver(payload["attempt_id"], result)  # type: ignore[attr-defined]
    report = step(ctx)
    assert report.ignored == 1
    with session_scope(db_factory) as session:
        children = session.scalar(select(func.count(Candidate.id))
                                  .where(Candidate.decision_id.is_not(None)))
        assert children == 1
        assert session.get_one(Job, job_id).tokens_used == TOKENS_PER_GENERATION


def test_lost_attempt_is_redispatched_then_failed_with_reason(
    db_factory: sessionmaker[Session],
) -> None:
    job_id = make_job(db_factory, budget_iterations=1)
    ctx = context(db_factory, DroppingDispatcher({"generate"}), max_tries=2, lease_s=60)
    step(ctx)
    step(ctx)
    for _ in range(2):
        ctx.clock.advance(61)  # type: ignore[attr-defined]
        step(ctx)
    with session_scope(db_factory) as session:
        attempt = session.scalars(select(Attempt).where(Attempt.kind == "generate")).one()
        assert attempt.state == "failed" and attempt.tries == 2
        assert attempt.reason == "lost:lease_expired_after_2_tries"
    run_to_end(ctx, job_id)
    with session_scope(db_factory) as session:
        track = repository.job_tracks(session, job_id)[0]
        assert track.iterations_done == 1 and track.held_out == "original"
        sent = [m.kind for m in ctx.dispatcher.sent]  # type: ignore[attr-defined]
        assert sent.count("generate") == 2


def test_token_budget_stops_dispatch(db_factory: sessionmaker[Session]) -> None:
    job_id = make_job(db_factory, budget_iterations=10, budget_tokens=250)
    run_to_end(context(db_factory), job_id)
    with session_scope(db_factory) as session:
        track = repository.job_tracks(session, job_id)[0]
        assert track.iterations_dispatched == 2  # 150 tokens, then 300 >= 250: stop
        assert "token budget" in (track.reason or "")
        assert session.get_one(Job, job_id).status == "completed"


def test_cancellation_stops_job_and_ignores_late_results(
    db_factory: sessionmaker[Session],
) -> None:
    job_id = make_job(db_factory, budget_iterations=10, parallelism=3)
    ctx = context(db_factory, DroppingDispatcher({"compile"}))
    for _ in range(3):
        step(ctx)
    with session_scope(db_factory) as session:
        repository.request_cancel(session, job_id)
    step(ctx)
    with session_scope(db_factory) as session:
        assert session.get_one(Job, job_id).status == "cancelled"
        assert {t.status for t in repository.job_tracks(session, job_id)} == {"cancelled"}
        open_states = session.scalars(select(Attempt.state).where(
            Attempt.state.in_(ACTIVE_ATTEMPT_STATES))).all()
        assert open_states == []
        lost = session.scalars(select(Attempt).where(Attempt.kind == "compile")).first()
        assert lost is not None and lost.reason == "cancelled"
        assert ingest_result(session, lost.id, {"ok": True}, 3) is False
    assert step(ctx).selected == 0


def test_restart_continues_with_identical_decisions(db_factory: sessionmaker[Session]) -> None:
    reference = make_job(db_factory, budget_iterations=8, parallelism=2)
    run_to_end(context(db_factory), reference)
    restarted = make_job(db_factory, budget_iterations=8, parallelism=2)
    first = context(db_factory, lease_s=30)
    for _ in range(4):
        step(first)  # then the process "dies": its inbox of results is lost
    second = context(db_factory, lease_s=30)  # new engine objects on the same database
    second.clock.advance(31)  # type: ignore[attr-defined]
    run_to_end(second, restarted)
    with session_scope(db_factory) as session:
        assert decisions(session, restarted) == decisions(session, reference)
        a, b = repository.job_tracks(session, reference)[0], repository.job_tracks(
            session, restarted)[0]
        assert (a.best_time_ms, a.iterations_done) == (b.best_time_ms, b.iterations_done)


def test_two_targets_get_two_tracks_and_queues(db_factory: sessionmaker[Session]) -> None:
    job_id = make_job(db_factory, targets=("cpu", "h100"), budget_iterations=3)
    ctx = context(db_factory)
    run_to_end(ctx, job_id)
    with session_scope(db_factory) as session:
        tracks = repository.job_tracks(session, job_id)
        assert [t.target for t in tracks] == ["cpu", "h100"]
        assert all(t.status == "completed" and t.iterations_done == 3 for t in tracks)
        for track in tracks:  # each track's frontier holds only its own candidates
            ids = {e.kernel_id for e in load_state(track).frontier}
            own = set(session.scalars(select(Candidate.id).where(Candidate.track_id == track.id)))
            assert {int(i) for i in ids} <= own and str(track.original_candidate_id) in ids
    queues = {(m.kind, m.payload["target"], m.queue) for m in ctx.dispatcher.submitted}  # type: ignore[attr-defined]
    assert ("profile", "h100", "gpu.h100") in queues and ("profile", "cpu", "cpu") in queues
    assert all(q == "llm" for k, _, q in queues if k == "generate")


def test_deposed_leader_cannot_write(db_factory: sessionmaker[Session]) -> None:
    make_job(db_factory)
    with session_scope(db_factory) as session:
        old = claim_leadership(session, "a")
    with session_scope(db_factory) as session:
        assert claim_leadership(session, "b") == old + 1
    ctx = context(db_factory)
    ctx.leader_epoch = old
    with pytest.raises(FencingError, match="another scheduler"):
        step(ctx)
    with session_scope(db_factory) as session:
        assert session.scalar(select(func.count(Track.id))) == 0
        assert session.scalars(select(Job.status)).one() == "queued"


def test_held_out_failure_falls_back_to_next_best(db_factory: sessionmaker[Session]) -> None:
    verified: list[str] = []

    def strict_verify(payload: dict[str, Any]) -> dict[str, Any]:
        verified.append(payload["editable"])
        first = len(verified) == 1  # the best fails its held-out cases, the next one passes
        return {"ok": not first, "reason": "wrong_result:case=h1" if first else ""}

    job_id = make_job(db_factory, budget_iterations=6)
    run_to_end(context(db_factory, InlineDispatcher({**FAKE_TASKS, "verify": strict_verify})),
               job_id)
    with session_scope(db_factory) as session:
        track = repository.job_tracks(session, job_id)[0]
        rejected = session.scalars(select(Candidate).where(
            Candidate.reason == "held_out:wrong_result:case=h1")).one()
        assert len(verified) == 2 and track.held_out == "passed"
        assert track.best_candidate_id != rejected.id
        best = session.get_one(Candidate, track.best_candidate_id)
        assert best.editable == verified[1]


def test_task_error_is_retried_then_recorded(db_factory: sessionmaker[Session]) -> None:
    def crashing_compile(_payload: dict[str, Any]) -> dict[str, Any]:
        raise OSError("disk full")

    job_id = make_job(db_factory, budget_iterations=1)
    ctx = context(db_factory, InlineDispatcher({**FAKE_TASKS, "compile": crashing_compile}),
                  max_tries=2)
    run_to_end(ctx, job_id)
    with session_scope(db_factory) as session:
        attempt = session.scalars(select(Attempt).where(Attempt.kind == "compile")).one()
        assert attempt.tries == 2 and attempt.reason == "task_error:OSError"
        assert attempt.state == "failed" and attempt.result["message"] == "disk full"  # type: ignore[index]
        child = session.get_one(Candidate, attempt.candidate_id)
        assert child.status == "rejected" and child.reason == "task_error:OSError"
        assert repository.job_tracks(session, job_id)[0].iterations_done == 1


def test_malformed_result_fails_its_attempt_not_the_scheduler(
    db_factory: sessionmaker[Session],
) -> None:
    def garbled_profile(payload: dict[str, Any]) -> dict[str, Any]:
        if payload.get("original"):
            return FAKE_TASKS["profile"](payload)
        return {"ok": True, "measurement": {"label": "estimated"}}  # keys missing

    job_id = make_job(db_factory, budget_iterations=2)
    run_to_end(context(db_factory, InlineDispatcher({**FAKE_TASKS, "profile": garbled_profile})),
               job_id)
    with session_scope(db_factory) as session:
        refused = session.scalars(select(Attempt).where(
            Attempt.kind == "profile", Attempt.decision_id.is_not(None))).all()
        assert [a.reason for a in refused] == ["malformed_result:measurement"] * 2
        assert all(a.state == "failed" and "lacks method, device, target, time_ms"
                   in a.result["message"] for a in refused)  # type: ignore[index]
        assert session.get_one(Job, job_id).status == "completed"


def test_worker_heartbeat_extends_the_lease(db_factory: sessionmaker[Session]) -> None:
    make_job(db_factory, budget_iterations=1)
    ctx = context(db_factory, DroppingDispatcher({"generate"}), max_tries=1, lease_s=60)
    step(ctx)
    step(ctx)
    with session_scope(db_factory) as session:
        attempt_id = session.scalars(select(Attempt.id).where(Attempt.kind == "generate")).one()
    for _ in range(3):  # 150 s in the queue, but the worker keeps saying it has the task
        ctx.clock.advance(50)  # type: ignore[attr-defined]
        ctx.dispatcher.deliver(attempt_id, {"heartbeat": True})  # type: ignore[attr-defined]
        assert step(ctx).ignored == 1
    with session_scope(db_factory) as session:
        assert session.get_one(Attempt, attempt_id).state == "dispatched"
    ctx.clock.advance(61)  # type: ignore[attr-defined]
    step(ctx)
    with session_scope(db_factory) as session:
        assert session.get_one(Attempt, attempt_id).state == "failed"


def test_wall_time_budget_abandons_pulls_in_flight(db_factory: sessionmaker[Session]) -> None:
    job_id = make_job(db_factory, budget_iterations=10, parallelism=2, budget_wall_s=100)
    ctx = context(db_factory, DroppingDispatcher({"compile"}))
    for _ in range(3):
        step(ctx)
    ctx.clock.advance(101)  # type: ignore[attr-defined]
    step(ctx)
    with session_scope(db_factory) as session:
        track = repository.job_tracks(session, job_id)[0]
        assert track.status == "completed" and "wall-time" in (track.reason or "")
        abandoned = session.scalars(select(Attempt).where(Attempt.kind == "compile")).all()
        assert abandoned and all(a.state == "failed" and (a.reason or "").startswith("abandoned")
                                 for a in abandoned)
        assert session.get_one(Job, job_id).status == "completed"


def test_arm_view_masks_saturated_dimensions(db_factory: sessionmaker[Session]) -> None:
    # fake h = SM 40, DRAM 60, L2 30 (% of peak): with DRAM's threshold at 50 the DRAM arms close
    job_id = make_job(db_factory, budget_iterations=2,
                      policy_params={"theta_sat": [80.0, 50.0, 75.0]})
    run_to_end(context(db_factory), job_id)
    with session_scope(db_factory) as session:
        arms = session.scalars(select(ArmStat).where(ArmStat.cluster == 0)).all()
        masked = {a.strategy for a in arms if a.masked}
        assert masked == {"vectorization", "fusion", "access_layout"}
        assert all(a.ucb_score is not None for a in arms)


class Kept:
    """Something a transaction keeps in its session's info."""


def test_what_a_fenced_transaction_kept_goes_when_it_ends_without_a_collection(
        sqlite_factory: sessionmaker[Session]) -> None:
    ctx = EngineContext(sqlite_factory, InlineDispatcher(FAKE_TASKS), Settings())
    gc.disable()  # as between the scheduler's collections
    try:
        with fenced(ctx) as session:
            send_on_commit(session)  # a listener on the session, as a pass registers
            kept = Kept()
            session.info["kept"] = kept
            gone = weakref.ref(kept)
            del kept
        assert gone() is None
    finally:
        gc.enable()
