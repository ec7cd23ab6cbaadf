"""The scheduler, one step at a time: select -> dispatch -> ingest -> update.

Read `step` top to bottom to follow one pull. Every sub-step is its own transaction that first
checks the leader epoch (fencing); work is handed to the dispatcher only after the transaction
that created it has committed. All state (policy state with its RNG, counters, attempts) lives
in the database, so a scheduler killed at any instant continues where it stopped. In the
distributed deployment this same `step` runs in the leader's loop (services/scheduler) with the
Celery dispatcher; embedded mode runs it in-process with a thread pool.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import Attempt, Candidate, Job, Problem, Track, utcnow
from kernelband.db.session import DatabaseError, session_scope
from kernelband.dispatch import Dispatcher, TaskMessage, TaskResult
from kernelband.engine_batch import BATCH_SIZE, apply_batch
from kernelband.engine_ingest import (
    apply_result,
    fail_lost_attempt,
    lock_attempt,
    start_acceptance,
)
from kernelband.engine_leases import expire_leases, extend_lease, requeue_orphans, retry_or_fail
from kernelband.engine_support import (
    ACTIVE_ATTEMPT_STATES,
    FencingError,
    append_event,
    budget_reason,
    fail_open_attempts,
    fail_open_pulls,
    lease_deadline,
    load_state,
    new_attempt,
    policy_for,
    pulls_in_flight,
    read_event_counters,
    save_state,
    task_payloads,
    verify_epoch,
)
from kernelband.fairshare import cap_per_team, fair_order
from kernelband.generate.normalize import source_hash
from kernelband.loop.translate import new_pull

log = logging.getLogger(__name__)
FINISHED_TRACK = ("completed", "cancelled", "failed")


@dataclass
class EngineContext:
    """What a scheduler step needs: database, dispatcher, settings, fence and clock."""

    factory: sessionmaker[Session]
    dispatcher: Dispatcher
    settings: Settings
    leader_epoch: int | None = None  # None: embedded mode, nothing to fence
    clock: Callable[[], datetime] = utcnow


@dataclass
class StepReport:
    """What one step did (for logs, metrics and the progress bar)."""

    started_jobs: int = 0
    expired: int = 0
    ingested: int = 0
    ignored: int = 0
    selected: int = 0
    dispatched: int = 0
    finished: list[int] = field(default_factory=list)  # job ids finished in this step


@contextmanager
def fenced(ctx: EngineContext) -> Iterator[Session]:
    """A transaction that refuses to commit unless this scheduler is still the leader."""
    with session_scope(ctx.factory) as session:
        verify_epoch(session, ctx.leader_epoch)
        yield session


def step(ctx: EngineContext, drain_timeout_s: float = 0.0) -> StepReport:
    """One scheduler pass over every running job."""
    report = StepReport()
    with fenced(ctx) as session:
        report.started_jobs = start_queued_jobs(session, ctx.settings.max_job_starts_per_team,
                                                ctx.settings.max_in_flight_per_team)
    with fenced(ctx) as session:
        report.expired = expire_leases(session, ctx.clock(), ctx.settings.max_tries,
                                       ctx.settings.lease_s, ctx.dispatcher.waiting,
                                       ctx.settings.queue_timeout_s)
    report.ingested, report.ignored = ingest_batch(ctx, ctx.dispatcher.drain(drain_timeout_s))
    with fenced(ctx) as session:
        report.finished = finish_tracks_and_jobs(session, ctx.clock())
    report.selected, report.dispatched = select_and_dispatch(ctx)
    return report


def start_queued_jobs(session: Session, per_team: int | None = None,
                      cap: int | None = None) -> int:
    """Queued jobs get one track per target, each starting with a baseline measurement.

    Jobs start in the fair order of `select_pulls`, at most `per_team` per team per cycle and
    none for a team already holding `cap` attempts in flight, so one big suite's baselines
    cannot flood the queues ahead of other teams.
    """
    queued = session.scalars(select(Job).where(Job.status == "queued").order_by(Job.id)).all()
    in_flight = in_flight_by_team(session)
    ordered = fair_order(queued, lambda j: j.team_id, lambda j: j.id, in_flight)
    full = {team for team, count in in_flight.items() if cap is not None and count >= cap}
    jobs = cap_per_team([j for j in ordered if j.team_id not in full], lambda j: j.team_id,
                        {}, per_team)
    for job in jobs:
        start_job(session, job)
    return len(jobs)


def start_job(session: Session, job: Job) -> None:
    """One queued job becomes running: a track per target, each with its baseline attempt."""
    job.status, job.started_at = "running", utcnow()
    problem = session.get_one(Problem, job.problem_id)
    for target in job.targets:
        track = Track(job_id=job.id, target=target, status="pending", started_at=utcnow())
        session.add(track)
        session.flush()
        original = Candidate(track_id=track.id, editable=problem.loaded["editable"],
                             status="compiled", lineage_depth=0, strategy=None,
                             source_hash=source_hash(problem.loaded["editable"]))
        session.add(original)
        session.flush()
        track.original_candidate_id = original.id
        new_attempt(session, track, "profile", original.id, ref={"original": True})
    append_event(session, job.id, "job_started", {"targets": list(job.targets)})


def in_flight_by_team(session: Session) -> dict[int, int]:
    """Open attempts (pending, dispatched or awaiting re-send) per team."""
    query = (select(Job.team_id, func.count(Attempt.id)).join(Job, Job.id == Attempt.job_id)
             .where(Attempt.state.in_(ACTIVE_ATTEMPT_STATES)).group_by(Job.team_id))
    return {int(team): int(count) for team, count in session.execute(query).all()}


def ingest_result(session: Session, attempt_id: int, result: dict, max_tries: int) -> bool:
    """Apply a worker result at most once per attempt id; False when it was a duplicate."""
    loaded = lock_attempt(session, attempt_id)  # held until applied (see lock_attempt)
    attempt = loaded[0] if loaded else None
    if attempt is None or attempt.state not in ("pending", "dispatched", "expired"):
        return False  # unknown, already applied, or closed by cancellation / expiry
    reason = str(result.get("reason") or "")
    if reason.startswith("task_error") and attempt.tries < max_tries:
        attempt.state, attempt.reason = "expired", f"{reason} on try {attempt.tries}; retrying"
        return True
    apply_result(session, attempt, result)
    return True


def ingest_batch(ctx: EngineContext, items: Sequence[TaskResult]) -> tuple[int, int]:
    """Apply results (and lease heartbeats) many per transaction; returns (applied, ignored).
    A batch failing on a result (not the fence or database) is retried one per transaction."""
    outcomes: list[bool] = []
    for start in range(0, len(items), BATCH_SIZE):
        chunk = items[start:start + BATCH_SIZE]
        try:
            with fenced(ctx) as session:
                outcomes += apply_batch(session, chunk, ctx.clock(), ctx.settings.lease_s,
                                        ctx.settings.max_tries)
        except (FencingError, DatabaseError):
            raise
        except Exception:
            log.exception("a batch of %s results failed; applying them one by one", len(chunk))
            outcomes += [ingest_safely(ctx, item.attempt_id, item.result) for item in chunk]
    return sum(outcomes), len(outcomes) - sum(outcomes)


def ingest_safely(ctx: EngineContext, attempt_id: int, result: dict) -> bool:
    """Ingest one result; a result that cannot be applied fails its attempt instead of the loop."""
    if result.get("heartbeat"):  # a worker started (or is still on) it: queue time is no loss
        with fenced(ctx) as session:
            now = ctx.clock()
            extend_lease(session, attempt_id, lease_deadline(now, ctx.settings.lease_s),
                         str(result.get("task_id") or ""), now)
        return False  # a lease extension only: the attempt stays open for its real result
    try:
        with fenced(ctx) as session:
            return ingest_result(session, attempt_id, result, ctx.settings.max_tries)
    except (FencingError, DatabaseError):
        raise
    except Exception as exc:  # a malformed result must not stop every other job
        log.exception("result of attempt %s could not be applied", attempt_id)
        reason = f"ingest_error:{type(exc).__name__}"
    with fenced(ctx) as session:
        loaded = lock_attempt(session, attempt_id)
        attempt = loaded[0] if loaded else None
        if attempt is None or attempt.state not in ("pending", "dispatched", "expired"):
            return False
        fail_lost_attempt(session, attempt, reason)
    return True


def finish_tracks_and_jobs(session: Session, now: datetime) -> list[int]:
    """Honour cancellation and budgets, start held-out acceptance, close finished jobs."""
    finished: list[int] = []
    for job in jobs_needing_finish(session, now):
        tracks = list(session.scalars(select(Track).where(Track.job_id == job.id)
                                      .order_by(Track.id)))
        if job.cancel_requested:
            cancel_job(session, job, tracks)
            finished.append(job.id)
            continue
        spent = budget_reason(job, now)
        for track in tracks:
            if track.status == "running" and spent and spent.startswith("wall-time"):
                # Time is the one budget that in-flight pulls keep spending: abandon them.
                fail_open_pulls(session, track.id, f"abandoned: {spent}")
            if track.status == "running" and pulls_in_flight(session, track.id) == 0 and (
                spent or track.iterations_dispatched >= job.budget_iterations
            ):
                start_acceptance(session, track, spent or "iteration budget spent")
        if all(t.status in FINISHED_TRACK for t in tracks):
            close_job(session, job, tracks)
            finished.append(job.id)
    return finished


def jobs_needing_finish(session: Session, now: datetime) -> list[Job]:
    """Running jobs where `finish_tracks_and_jobs` can act; the rest are not examined.

    Stateless (read from the database every pass), so a restarted scheduler misses nothing:
    a cancel request, a spent budget, a running track whose iterations are all dispatched and
    answered, or no unfinished track left.
    """
    running = session.scalars(select(Job).where(Job.status == "running").order_by(Job.id)).all()
    if not running:
        return []
    open_pull = (select(Attempt.id).where(Attempt.track_id == Track.id,
                                          Attempt.decision_id.is_not(None),
                                          Attempt.state.in_(ACTIVE_ATTEMPT_STATES)).exists())
    done_searching = (select(Track.job_id).join(Job, Job.id == Track.job_id)
                      .where(Job.status == "running", Track.status == "running",
                             Track.iterations_dispatched >= Job.budget_iterations, ~open_pull))
    unfinished = (select(Track.id).where(Track.job_id == Job.id,
                                         Track.status.not_in(FINISHED_TRACK)).exists())
    all_finished = select(Job.id).where(Job.status == "running", ~unfinished)
    ready = set(session.scalars(done_searching)) | set(session.scalars(all_finished))
    return [job for job in running
            if job.cancel_requested or job.id in ready or budget_reason(job, now)]


def cancel_job(session: Session, job: Job, tracks: list[Track]) -> None:
    """Stop a job on request: open attempts close, late results are ignored."""
    for track in tracks:
        if track.status not in FINISHED_TRACK:
            fail_open_attempts(session, track.id, "cancelled")
            track.status, track.reason, track.finished_at = "cancelled", "cancelled", utcnow()
    job.status, job.finished_at, job.reason = "cancelled", utcnow(), "cancelled on request"
    append_event(session, job.id, "job_cancelled", {})


def close_job(session: Session, job: Job, tracks: list[Track]) -> None:
    """A job completes when every track finished; it fails when none completed."""
    completed = [t for t in tracks if t.status == "completed"]
    job.status = "completed" if completed else "failed"
    if not completed:
        job.reason = "; ".join(f"{t.target}: {t.reason}" for t in tracks)
    job.finished_at = utcnow()
    append_event(session, job.id, "job_finished", {
        "status": job.status,
        "tracks": {t.target: {"status": t.status, "best_speedup": t.best_speedup,
                              "label": t.best_label, "held_out": t.held_out} for t in tracks},
    })


def select_and_dispatch(ctx: EngineContext) -> tuple[int, int]:
    """New pulls are committed as pending attempts first, then every pending attempt is sent."""
    with fenced(ctx) as session:
        selected = select_pulls(session, ctx.clock(), ctx.settings.max_in_flight_per_team)
    return selected, dispatch_pending(ctx)


def select_pulls(session: Session, now: datetime, cap: int | None = None) -> int:
    """Ask each running track's policy for new pulls while it has free capacity and budget.

    Every free slot is one item: slots are ordered round-robin between teams, then jobs
    (kernelband/fairshare.py), and a team's slots beyond `cap` attempts in flight are dropped.
    """
    query = (select(Track, Job).join(Job, Job.id == Track.job_id)
             .where(Track.status == "running", Job.status == "running",
                    Job.cancel_requested.is_(False)).order_by(Track.id))
    slots: list[tuple[Track, Job]] = []
    rows = session.execute(query).all()
    in_flight_pulls = pulls_in_flight_by_track(session, [track.id for track, _ in rows])
    for track, job in rows:
        if budget_reason(job, now):
            continue
        free = job.parallelism - in_flight_pulls.get(track.id, 0)
        free = min(free, job.budget_iterations - track.iterations_dispatched)
        slots.extend([(track, job)] * max(free, 0))
    in_flight = in_flight_by_team(session)
    ordered = fair_order(slots, lambda r: r[1].team_id, lambda r: r[1].id, in_flight)
    kept = cap_per_team(ordered, lambda r: r[1].team_id, in_flight, cap)
    per_track: dict[int, tuple[Track, Job, int]] = {}
    for track, job in kept:  # dict order = first slot of each track in the fair order
        count = per_track.get(track.id, (track, job, 0))[2]
        per_track[track.id] = (track, job, count + 1)
    read_event_counters(session, (job.id for _, job, _ in per_track.values()))
    return sum(select_for_track(session, job, track, count)
               for track, job, count in per_track.values())


def pulls_in_flight_by_track(session: Session, track_ids: list[int]) -> dict[int, int]:
    """Open pulls per track in one grouped query (`pulls_in_flight` for many tracks)."""
    if not track_ids:
        return {}
    query = (select(Attempt.track_id, func.count(Attempt.id))
             .where(Attempt.track_id.in_(track_ids), Attempt.decision_id.is_not(None),
                    Attempt.state.in_(ACTIVE_ATTEMPT_STATES)).group_by(Attempt.track_id))
    return {int(track): int(count) for track, count in session.execute(query).all()}


def select_for_track(session: Session, job: Job, track: Track, count: int) -> int:
    """`count` decisions from the policy, each recorded as a pending generate attempt."""
    policy = policy_for(job)
    state = before = load_state(track)
    for _ in range(count):
        decision, state = policy.select(state)
        seed = job.seed * 100_003 + track.iterations_dispatched  # reproducible per pull
        ref = {"strategy": decision.strategy, "cluster": decision.cluster, "seed": seed}
        step = new_pull(session, job, track, decision, ref)  # a translate step on a placeholder
        track.iterations_dispatched += 1
        append_event(session, job.id, "pull_selected",
                     {"target": track.target, **decision.to_dict(), **step})
    save_state(session, track, state, before)
    return count


def dispatch_pending(ctx: EngineContext, limit: int = 256) -> int:
    """Claim pending attempts in one committed transaction, then hand them to the dispatcher."""
    messages: list[TaskMessage] = []
    with fenced(ctx) as session:
        query = (select(Attempt).where(Attempt.state.in_(("pending", "expired")))
                 .order_by(Attempt.id).limit(limit).with_for_update())
        attempts = list(session.scalars(query))
        payloads = task_payloads(session, attempts)  # every read first; then one flush of updates
        for attempt, payload in zip(attempts, payloads, strict=True):
            attempt.tries += 1
            attempt.state, attempt.dispatched_at = "dispatched", ctx.clock()
            attempt.started_at = None  # this try waits in its queue until a worker beats
            attempt.lease_expires_at = lease_deadline(ctx.clock(), ctx.settings.lease_s)
            attempt.task_id = f"kb-{attempt.id}-{attempt.tries}"
            messages.append(TaskMessage(attempt.id, attempt.kind, attempt.queue, payload,
                                        attempt.task_id))
    for message in messages:  # after commit: a crash here is recovered by lease expiry
        try:
            ctx.dispatcher.submit(message)
        except Exception:  # broker down: the lease brings the attempt back
            log.exception("could not submit attempt %s; it will be retried after its lease",
                          message.attempt_id)
    return len(messages)


def job_is_finished(factory: sessionmaker[Session], job_id: int) -> bool:
    """True once the job reached completed, cancelled or failed."""
    with session_scope(factory) as session:
        job = session.get_one(Job, job_id)
        return job.status in ("completed", "cancelled", "failed")


__all__ = [
    "EngineContext",
    "StepReport",
    "cancel_job",
    "close_job",
    "dispatch_pending",
    "expire_leases",
    "extend_lease",
    "finish_tracks_and_jobs",
    "in_flight_by_team",
    "ingest_batch",
    "ingest_result",
    "requeue_orphans",
    "retry_or_fail",
    "job_is_finished",
    "jobs_needing_finish",
    "lock_attempt",
    "pulls_in_flight_by_track",
    "select_and_dispatch",
    "select_for_track",
    "select_pulls",
    "start_job",
    "start_queued_jobs",
    "step",
]
