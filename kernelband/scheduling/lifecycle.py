"""A job's life in the scheduler: queued jobs start, finished tracks and jobs close.

A queued job starts with one track per target, each with its baseline measurement. Tracks
stop searching when a budget is spent or every iteration is answered, then verify their best
on held-out cases; the job closes when every track finished, or on a cancel request.
Everything is read from the database each pass, so a restarted scheduler misses nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.models import Attempt, Candidate, Job, Problem, Track, utcnow
from kernelband.db.session import session_scope
from kernelband.generate.model_check import is_fatal_generator_reason
from kernelband.generate.normalize import source_hash
from kernelband.scheduling.attempts import (
    ACTIVE_ATTEMPT_STATES,
    fail_open_attempts,
    fail_open_pulls,
    new_attempt,
    pulls_in_flight,
)
from kernelband.scheduling.budgets import budget_reason
from kernelband.scheduling.events import append_event
from kernelband.scheduling.fairshare import cap_per_team, fair_order
from kernelband.scheduling.ingest import start_acceptance
from kernelband.scheduling.selection import in_flight_by_team
from kernelband.scheduling.state import write_final_view

FINISHED_TRACK = ("completed", "cancelled", "failed")


def start_queued_jobs(session: Session, per_team: int | None = None,
                      cap: int | None = None, running_cap: int | None = None) -> int:
    """Queued jobs get one track per target, each starting with a baseline measurement.

    Jobs start in the fair order of `select_pulls`, at most `per_team` per team per cycle and
    none for a team already holding `cap` attempts in flight, so one big suite's baselines
    cannot flood the queues ahead of other teams; with `running_cap`, none for a team already
    running that many jobs (the next starts as one finishes).
    """
    queued = session.scalars(select(Job).where(Job.status == "queued").order_by(Job.id)).all()
    if not queued:
        return 0  # the usual pass: no count of every open attempt for nothing
    in_flight = in_flight_by_team(session)
    ordered = fair_order(queued, lambda j: j.team_id, lambda j: j.id, in_flight)
    full = {team for team, count in in_flight.items() if cap is not None and count >= cap}
    jobs = cap_per_team([j for j in ordered if j.team_id not in full], lambda j: j.team_id,
                        {}, per_team)
    if running_cap is not None:
        running = {team: count for team, count in session.execute(
            select(Job.team_id, func.count()).where(Job.status == "running").group_by(Job.team_id))}
        jobs = cap_per_team(jobs, lambda j: j.team_id, running, running_cap)
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

    Plain reads of columns joined here, not one statement: where nothing analyzes the tables
    the planner guessed one running job and scanned the running tracks once per job (measured
    at 100 jobs: 2,300 buffers, 18 ms a pass); only the jobs to act on are loaded as rows.
    """
    running = {row.id: row for row in session.execute(_RUNNING_BUDGETS)}
    if not running:
        return []
    tracks = session.execute(select(Track.id, Track.job_id, Track.status,
                                    Track.iterations_dispatched)
                             .where(Track.job_id.in_(list(running)))).all()
    unfinished = {t.job_id for t in tracks if t.status not in FINISHED_TRACK}
    spent = [t for t in tracks if t.status == "running"
             and t.iterations_dispatched >= running[t.job_id].budget_iterations]
    ready = (set(running) - unfinished) | done_searching(session, spent)
    ids = [job.id for job in running.values()
           if job.cancel_requested or job.id in ready or budget_reason(job, now)]
    if not ids:
        return []
    return list(session.scalars(select(Job).where(Job.id.in_(ids)).order_by(Job.id)))


def done_searching(session: Session, spent: Sequence[Any]) -> set[int]:
    """Jobs of the `spent` tracks (rows with `id` and `job_id`: running, every iteration
    dispatched) that have no pull open: one read of those tracks' open pulls (usually none)."""
    if not spent:
        return set()
    busy = set(session.scalars(
        select(Attempt.track_id).where(Attempt.track_id.in_([row.id for row in spent]),
                                       Attempt.decision_id.is_not(None),
                                       Attempt.state.in_(ACTIVE_ATTEMPT_STATES))))
    return {row.job_id for row in spent if row.id not in busy}


# What `jobs_needing_finish` reads of every running job (`budget_reason`, the cancel flag and
# the iteration budget): the whole rows, JSON columns parsed, cost more than the reads that
# pick the few to act on.
_RUNNING_BUDGETS = select(Job.id, Job.cancel_requested, Job.budget_iterations,
                          Job.budget_tokens, Job.tokens_used, Job.budget_usd, Job.cost_usd,
                          Job.budget_wall_s, Job.started_at).where(
    Job.status == "running").order_by(Job.id)


def cancel_job(session: Session, job: Job, tracks: list[Track]) -> None:
    """Stop a job on request: open attempts close, late results are ignored."""
    for track in tracks:
        if track.status not in FINISHED_TRACK:
            fail_open_attempts(session, track.id, "cancelled")
            write_final_view(session, track)
            track.status, track.reason, track.finished_at = "cancelled", "cancelled", utcnow()
    job.status, job.finished_at, job.reason = "cancelled", utcnow(), "cancelled on request"
    append_event(session, job.id, "job_cancelled", {})


def close_job(session: Session, job: Job, tracks: list[Track]) -> None:
    """A job completes when every track finished; it fails when none completed, or when its
    generator never worked (a wrong model, provider or key: "no faster candidate" would hide it)."""
    completed = [t for t in tracks if t.status == "completed"]
    unusable = generator_failure(session, job)
    job.status = "completed" if completed and unusable is None else "failed"
    if unusable is not None:
        job.reason = unusable
    elif not completed:
        job.reason = "; ".join(f"{t.target}: {t.reason}" for t in tracks)
    job.finished_at = utcnow()
    append_event(session, job.id, "job_finished", {
        "status": job.status,
        "tracks": {t.target: {"status": t.status, "best_speedup": t.best_speedup,
                              "label": t.best_label, "held_out": t.held_out} for t in tracks},
    })


def generator_failure(session: Session, job: Job) -> str | None:
    """The generator's own error when no generation of an LLM job succeeded and at least one
    failed on the generator's configuration (`model_check.is_fatal_generator_reason`)."""
    if job.generator != "llm":
        return None
    rows = session.execute(select(Attempt.reason, Attempt.result)
                           .where(Attempt.job_id == job.id, Attempt.kind == "generate")
                           .order_by(Attempt.id)).all()
    if any(reason is None for reason, _ in rows):
        return None  # at least one generation worked: the model is usable
    fatal = [(reason, result) for reason, result in rows if is_fatal_generator_reason(reason)]
    if not fatal:
        return None
    reason, result = fatal[-1]
    message = str((result or {}).get("message") or "").strip()
    return (f"the generator could not be used with model '{job.model}': {reason}"
            + (f" ({message})" if message else "")
            + "; fix generator.model or the server's KERNELBAND_LLM_* settings and submit again")


def job_is_finished(factory: sessionmaker[Session], job_id: int) -> bool:
    """True once the job reached completed, cancelled or failed."""
    with session_scope(factory) as session:
        job = session.get_one(Job, job_id)
        return job.status in ("completed", "cancelled", "failed")


__all__ = ["FINISHED_TRACK", "cancel_job", "close_job", "finish_tracks_and_jobs",
           "job_is_finished", "jobs_needing_finish", "start_job", "start_queued_jobs"]
