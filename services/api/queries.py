"""Read queries of the API, always scoped to the calling team."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from kernelband.db.models import (
    FINISHED_JOB_STATUSES,
    ArmStat,
    Attempt,
    Candidate,
    Event,
    Job,
    Measurement,
    Problem,
    Suite,
    Track,
    Worker,
)
from services.api.errors import ApiError, not_found
from services.api.ids import public


def team_job(session: Session, team_id: int, job_id: int) -> Job:
    """The team's job, or 404 (another team's job looks exactly like a missing one)."""
    job = session.get(Job, job_id)
    if job is None or job.team_id != team_id:
        raise not_found("job", public("job", job_id))
    return job


# The polled reads' statements are built once: building one costs more CPU than running it.
_JOB_AND_PROBLEM = (select(Job, Problem).join(Problem, Problem.id == Job.problem_id)
                    .where(Job.id == bindparam("job_id"), Job.team_id == bindparam("team_id")))
_TRACKS_WITH_BEST = (select(Track, Measurement).outerjoin(
    Measurement, (Measurement.candidate_id == Track.best_candidate_id)
    & (Measurement.target == Track.target)).where(Track.job_id == bindparam("job_id")))
_EVENT_SEQS = (select(Event.seq).where(Event.job_id == bindparam("job_id"),
                                       Event.seq > bindparam("after"))
               .order_by(Event.seq).limit(bindparam("limit")))
_EVENTS = (select(Event).where(Event.job_id == bindparam("job_id"), Event.seq > bindparam("after"),
                               Event.seq <= bindparam("last")).order_by(Event.seq))


def team_job_and_problem(session: Session, team_id: int, job_id: int) -> tuple[Job, Problem]:
    """The team's job with its problem in one query, or 404 (like `team_job`)."""
    row = session.execute(_JOB_AND_PROBLEM, {"job_id": job_id, "team_id": team_id}).first()
    if row is None:
        raise not_found("job", public("job", job_id))
    return row[0], row[1]


def found_version(job_id: int, version: int | None) -> int:
    """The version from `authenticate_for_job`, or 404 (another team's job looks missing)."""
    if version is None:
        raise not_found("job", public("job", job_id))
    return version


def job_track(session: Session, job: Job, target: str) -> Track | None:
    """The job's track for a target (None while the scheduler has not started it)."""
    if target not in job.targets:
        raise ApiError(
            404, "not_found",
            f"Job {public('job', job.id)} has no target '{target}'; its targets are {', '.join(job.targets)}.",
        )
    stmt = select(Track).where(Track.job_id == job.id, Track.target == target)
    return session.scalars(stmt).first()


def list_jobs(
    session: Session, team_id: int, *, status: str | None, target: str | None,
    suite: str | None, limit: int, offset: int,
) -> tuple[list[tuple[Job, Problem]], int]:
    """A page of the team's jobs (newest first) and the total matching count."""
    stmt = select(Job, Problem).join(Problem, Problem.id == Job.problem_id)
    stmt = stmt.where(Job.team_id == team_id)
    if status:
        stmt = stmt.where(Job.status == status)
    if suite:
        stmt = stmt.where(Job.suite_id == suite)
    rows = [(j, p) for j, p in session.execute(stmt.order_by(Job.id.desc())).all()]
    # targets is a JSON list: filtering in Python keeps the query identical on SQLite/Postgres.
    if target:
        rows = [(j, p) for j, p in rows if target in j.targets]
    return rows[offset : offset + limit], len(rows)


def active_job_count(session: Session, team_id: int) -> int:
    """How many of the team's jobs are queued or running, each unfinished suite counting once."""
    suite_ids = select(Suite.id).where(Suite.team_id == team_id)
    stmt = select(func.count()).select_from(Job).where(
        Job.team_id == team_id, Job.status.not_in(FINISHED_JOB_STATUSES),
        Job.suite_id.is_(None) | Job.suite_id.not_in(suite_ids),
    )
    return int(session.scalar(stmt) or 0) + active_suite_count(session, team_id)


def active_suite_count(session: Session, team_id: int) -> int:
    """How many of the team's suites still have a queued or running job."""
    stmt = select(func.count(func.distinct(Job.suite_id))).select_from(Job).join(
        Suite, Suite.id == Job.suite_id).where(
        Suite.team_id == team_id, Job.team_id == team_id,
        Job.status.not_in(FINISHED_JOB_STATUSES))
    return int(session.scalar(stmt) or 0)


def job_tracks(session: Session, job_id: int) -> dict[str, Track]:
    """The job's tracks by target."""
    rows = session.scalars(select(Track).where(Track.job_id == job_id)).all()
    return {t.target: t for t in rows}


def job_tracks_with_best(session: Session,
                         job_id: int) -> dict[str, tuple[Track, Measurement | None]]:
    """The job's tracks by target, each with its best candidate's newest measurement on the
    track's target (as `best_measurement`), in one query."""
    found: dict[str, tuple[Track, Measurement | None]] = {}
    for track, m in session.execute(_TRACKS_WITH_BEST, {"job_id": job_id}).all():
        kept = found.get(track.target)
        if kept is None or (m is not None and (kept[1] is None or m.id > kept[1].id)):
            found[track.target] = (track, m)
    return found


def best_measurement(session: Session, track: Track) -> Measurement | None:
    """The newest measurement of the track's best candidate on the track's target."""
    if track.best_candidate_id is None:
        return None
    stmt = (
        select(Measurement)
        .where(Measurement.candidate_id == track.best_candidate_id,
               Measurement.target == track.target)
        .order_by(Measurement.id.desc())
    )
    return session.scalars(stmt).first()


def job_candidates(
    session: Session, job_id: int, target: str | None, status: str | None, limit: int, offset: int
) -> list[tuple[Candidate, Track]]:
    """The job's candidates in creation order, optionally for one target or status."""
    stmt = select(Candidate, Track).join(Track, Track.id == Candidate.track_id)
    stmt = stmt.where(Track.job_id == job_id)
    if target:
        stmt = stmt.where(Track.target == target)
    if status:
        stmt = stmt.where(Candidate.status == status)
    stmt = stmt.order_by(Candidate.id).limit(limit).offset(offset)
    return [(c, t) for c, t in session.execute(stmt).all()]


def job_candidate(session: Session, job_id: int, candidate_id: int) -> tuple[Candidate, Track]:
    """One candidate of the job, or 404."""
    stmt = (
        select(Candidate, Track).join(Track, Track.id == Candidate.track_id)
        .where(Track.job_id == job_id, Candidate.id == candidate_id)
    )
    row = session.execute(stmt).first()
    if row is None:
        # The job is the team's (checked before): say that this job has no such candidate,
        # which is true whether the id is another job's or nobody's.
        job, candidate = public("job", job_id), public("cand", candidate_id)
        raise ApiError(404, "not_found", f"Job {job} has no candidate {candidate}; list "
                       f"its candidates with GET /v1/jobs/{job}/candidates.")
    return row[0], row[1]


def measurements_by_candidate(
    session: Session, candidate_ids: Sequence[int]
) -> dict[int, list[Measurement]]:
    """Measurements of many candidates in one query."""
    out: dict[int, list[Measurement]] = {cid: [] for cid in candidate_ids}
    if not candidate_ids:
        return out
    stmt = select(Measurement).where(Measurement.candidate_id.in_(candidate_ids))
    for m in session.scalars(stmt.order_by(Measurement.id)).all():
        out[m.candidate_id].append(m)
    return out


def arm_stats(session: Session, track_id: int) -> list[ArmStat]:
    """A track's arms ordered by cluster then strategy."""
    stmt = select(ArmStat).where(ArmStat.track_id == track_id)
    return list(session.scalars(stmt.order_by(ArmStat.cluster, ArmStat.strategy)).all())


def events_after(session: Session, job_id: int, after: int, limit: int) -> tuple[list[Event], bool]:
    """Up to `limit` events with seq > after, and whether more follow.

    The numbers come first from the (job_id, seq) index alone; event rows (with their
    payloads) are read only when there is something new, which most polls find there is not.
    """
    seqs = list(session.scalars(_EVENT_SEQS,
                                {"job_id": job_id, "after": after, "limit": limit + 1}))
    if not seqs:
        return [], False
    last = seqs[min(limit, len(seqs)) - 1]
    events = session.scalars(_EVENTS, {"job_id": job_id, "after": after, "last": last}).all()
    return list(events), len(seqs) > limit


def workers(session: Session) -> list[Worker]:
    """All workers that have sent a heartbeat."""
    return list(session.scalars(select(Worker).order_by(Worker.queue, Worker.name)).all())


def workers_fingerprint(session: Session) -> tuple[int, int, datetime | None]:
    """Count, newest id and newest heartbeat of the workers table: changes with any beat."""
    count, newest_id, newest_beat = session.execute(
        select(func.count(Worker.id), func.max(Worker.id), func.max(Worker.last_heartbeat))).one()
    return int(count or 0), int(newest_id or 0), newest_beat


def pending_attempts_by_queue(session: Session) -> dict[str, int]:
    """Attempts waiting or in flight per queue, the queue depth when no broker is configured."""
    stmt = (
        select(Attempt.queue, func.count())
        .where(Attempt.state.in_(("pending", "dispatched")))
        .group_by(Attempt.queue)
    )
    return {str(q): int(n) for q, n in session.execute(stmt).all()}


def age_s(moment: datetime | None, now: datetime | None = None) -> float | None:
    """Seconds since `moment` (naive SQLite datetimes are UTC)."""
    if moment is None:
        return None
    now = now or datetime.now(UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return max(0.0, (now - moment).total_seconds())
