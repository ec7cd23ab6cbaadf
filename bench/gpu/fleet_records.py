"""Read-only views of the service's tables for the fleet run (the harness's own eyes).

The API does not expose attempts, so the harness reads them from Postgres; it never writes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from bench.gpu.fleet_checks import (
    AttemptRow,
    CandidateRow,
    JobRow,
    MeasurementRow,
    PullRow,
    Records,
    TrackRow,
)
from kernelband.db.models import Attempt, Candidate, Event, Job, Measurement, Track, Worker


def epoch(moment: datetime | None) -> float | None:
    """Seconds since the epoch; naive values are UTC."""
    if moment is None:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def suite_job_ids(engine: Engine, suite_id: str) -> list[int]:
    with Session(engine) as session:
        return list(session.scalars(select(Job.id).where(Job.suite_id == suite_id)
                                    .order_by(Job.id)))


def latest_suite_id(engine: Engine) -> str | None:
    """The newest suite's id (this run creates exactly one)."""
    with Session(engine) as session:
        return session.scalar(select(Job.suite_id).where(Job.suite_id.is_not(None))
                              .order_by(Job.id.desc()).limit(1))


def _attempt(row: Attempt) -> AttemptRow:
    result: dict[str, Any] = row.result if isinstance(row.result, dict) else {}
    raw_meta = result.get("_worker")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    timings = {str(k): float(v) for k, v in (result.get("timings") or {}).items()
               if isinstance(v, int | float) and not isinstance(v, bool) and v >= 0}
    wall = meta.get("wall_s")
    return AttemptRow(
        id=row.id, job_id=row.job_id, track_id=row.track_id, kind=row.kind, state=row.state,
        tries=row.tries, queue=row.queue, candidate_id=row.candidate_id,
        decision_id=row.decision_id, dispatched_at=epoch(row.dispatched_at),
        started_at=epoch(row.started_at), finished_at=epoch(row.finished_at),
        has_result=row.result is not None, worker=meta.get("name"),
        worker_wall_s=float(wall) if isinstance(wall, int | float) else None,
        timings=timings, reason=row.reason)


def attempts(engine: Engine, job_ids: list[int]) -> list[AttemptRow]:
    with Session(engine) as session:
        rows = session.scalars(select(Attempt).where(Attempt.job_id.in_(job_ids))
                               .order_by(Attempt.id))
        return [_attempt(a) for a in rows]


def read_records(engine: Engine, job_ids: list[int]) -> Records:
    """Jobs, tracks, attempts, candidates, measurements and finished pulls of `job_ids`."""
    with Session(engine) as session:
        jobs = [JobRow(j.id, j.status) for j in
                session.scalars(select(Job).where(Job.id.in_(job_ids)))]
        tracks = [TrackRow(t.id, t.job_id, t.target, t.status, t.iterations_done) for t in
                  session.scalars(select(Track).where(Track.job_id.in_(job_ids)))]
        track_ids = [t.id for t in tracks]
        candidates = [CandidateRow(c.id, c.track_id, c.decision_id, c.lineage_depth, c.status)
                      for c in session.scalars(select(Candidate)
                                               .where(Candidate.track_id.in_(track_ids)))]
        measurements = [MeasurementRow(m.candidate_id, m.target) for m in session.scalars(
            select(Measurement).where(Measurement.candidate_id.in_([c.id for c in candidates])))]
        pulls = [PullRow(e.job_id, str(e.payload.get("target")), e.payload.get("decision"))
                 for e in session.scalars(select(Event).where(
                     Event.job_id.in_(job_ids), Event.kind == "pull_finished"))]
    return Records(jobs, tracks, attempts(engine, job_ids), candidates, measurements, pulls)


def running_measurement(engine: Engine, queue: str) -> AttemptRow | None:
    """A profile/verify try a worker of `queue` has taken and not answered yet (oldest first)."""
    with Session(engine) as session:
        row = session.scalars(select(Attempt).where(
            Attempt.queue == queue, Attempt.kind.in_(("profile", "verify")),
            Attempt.state == "dispatched", Attempt.started_at.is_not(None))
            .order_by(Attempt.started_at).limit(1)).first()
        return _attempt(row) if row is not None else None


def workers(engine: Engine) -> list[dict[str, Any]]:
    """The workers table: name, queue, GPU, last heartbeat."""
    with Session(engine) as session:
        return [{"name": w.name, "queue": w.queue, "target": w.target, "gpu_name": w.gpu_name,
                 "last_heartbeat": epoch(w.last_heartbeat), "versions": w.versions}
                for w in session.scalars(select(Worker).order_by(Worker.name))]


def worker_holding(engine: Engine, attempt_id: int) -> str | None:
    """The worker whose last heartbeat names `attempt_id` as its current attempt, if any."""
    with Session(engine) as session:
        return session.scalar(select(Worker.name).where(Worker.current_attempt_id == attempt_id)
                              .limit(1))
