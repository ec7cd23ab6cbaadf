"""Record a fleet run: the service's rows it reads, and what they say (nothing lost or doubled,
each measuring worker's busy share, pulls/s, time per step).

The API does not expose attempts, so the harness reads Postgres, read-only. The checks below
the readers take plain rows (times in seconds since the epoch) and touch no database or clock.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from statistics import median
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from kernelband.db.models import Attempt, Candidate, Event, Job, Measurement, Track, Worker
from kernelband.scheduling.attempts import ACTIVE_ATTEMPT_STATES

CLOSED_STATES = ("done", "failed")
FINISHED_JOB_STATES = ("completed", "cancelled", "failed")
FINISHED_TRACK_STATES = ("completed", "cancelled", "failed")
MEASURING_KINDS = ("profile", "verify")


@dataclass(frozen=True)
class AttemptRow:
    """One attempt as the scheduler recorded it (its last try's times)."""

    id: int
    job_id: int
    track_id: int
    kind: str
    state: str
    tries: int
    queue: str
    candidate_id: int | None = None
    decision_id: str | None = None
    dispatched_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    has_result: bool = False
    worker: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class CandidateRow:
    id: int
    track_id: int
    decision_id: str | None
    lineage_depth: int
    status: str


@dataclass(frozen=True)
class MeasurementRow:
    candidate_id: int
    target: str


@dataclass(frozen=True)
class PullRow:
    """One `pull_finished` event."""

    job_id: int
    target: str
    decision: str | None


@dataclass(frozen=True)
class TrackRow:
    id: int
    job_id: int
    target: str
    status: str
    iterations_done: int


@dataclass(frozen=True)
class JobRow:
    id: int
    status: str


@dataclass(frozen=True)
class Records:
    """Everything the checks read, for the jobs of one suite."""

    jobs: Sequence[JobRow]
    tracks: Sequence[TrackRow]
    attempts: Sequence[AttemptRow]
    candidates: Sequence[CandidateRow]
    measurements: Sequence[MeasurementRow]
    pulls: Sequence[PullRow]


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
    meta = result.get("_worker")
    return AttemptRow(
        id=row.id, job_id=row.job_id, track_id=row.track_id, kind=row.kind, state=row.state,
        tries=row.tries, queue=row.queue, candidate_id=row.candidate_id,
        decision_id=row.decision_id, dispatched_at=epoch(row.dispatched_at),
        started_at=epoch(row.started_at), finished_at=epoch(row.finished_at),
        has_result=row.result is not None,
        worker=meta.get("name") if isinstance(meta, dict) else None, reason=row.reason)


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


def workers(engine: Engine) -> list[dict[str, Any]]:
    """The workers table: name, queue, GPU, last heartbeat."""
    with Session(engine) as session:
        return [{"name": w.name, "queue": w.queue, "target": w.target, "gpu_name": w.gpu_name,
                 "last_heartbeat": epoch(w.last_heartbeat), "versions": w.versions}
                for w in session.scalars(select(Worker).order_by(Worker.name))]


def _repeated(keys: Iterable[Any], more: Counter[Any] | None = None) -> dict[str, int]:
    return {str(k): n for k, n in Counter(keys).items() if n > 1 + (more or Counter())[k]}


def integrity(records: Records) -> dict[str, Any]:
    """What was lost or doubled; `ok` is True when every list is empty.

    Doubled: a candidate measured twice on one target (each finished verify, the final re-measure,
    allows one more), a decision with two children or two finished pulls. Lost: an attempt still
    open, a job not finished, a closed attempt without a result, a failed one without a reason, a
    decision of a finished track without a finished pull, a track whose iterations disagree.
    """
    tracks = {t.id: t for t in records.tracks}
    track_key = {(t.job_id, t.target): t for t in records.tracks}
    finished_pulls = Counter((p.job_id, p.target) for p in records.pulls)
    pulled = {(p.job_id, p.target, p.decision) for p in records.pulls}
    decisions = {(a.job_id, tracks[a.track_id].target, a.decision_id) for a in records.attempts
                 if a.kind == "generate" and a.decision_id and a.track_id in tracks
                 and tracks[a.track_id].status in FINISHED_TRACK_STATES}
    verified = Counter((a.candidate_id, tracks[a.track_id].target) for a in records.attempts
                       if a.kind == "verify" and a.state == "done" and a.track_id in tracks)
    found = {
        "doubled_measurements": _repeated(((m.candidate_id, m.target) for m in records.measurements),
                                          verified),
        "doubled_children": _repeated((c.track_id, c.decision_id) for c in records.candidates
                                      if c.lineage_depth > 0 and c.decision_id),
        "doubled_pulls": _repeated((p.job_id, p.target, p.decision) for p in records.pulls
                                   if p.decision),
        "open_attempts": sorted(a.id for a in records.attempts if a.state in ACTIVE_ATTEMPT_STATES),
        "unfinished_jobs": sorted(j.id for j in records.jobs
                                  if j.status not in FINISHED_JOB_STATES),
        "closed_without_result": sorted(a.id for a in records.attempts
                                        if a.state in CLOSED_STATES and not a.has_result),
        "failed_without_reason": sorted(a.id for a in records.attempts
                                        if a.state == "failed" and not a.reason),
        "decisions_without_pull": sorted(str(d) for d in decisions - pulled),
        "iterations_mismatch": sorted(
            f"job {job} {target}: {t.iterations_done} iterations, {finished_pulls[(job, target)]} pulls"
            for (job, target), t in track_key.items()
            if t.iterations_done != finished_pulls[(job, target)]),
    }
    return {"ok": not any(found.values()), **found, "counts": counts(records)}


def counts(records: Records) -> dict[str, Any]:
    """Attempts per kind and state, results recorded, retried attempts, candidates, pulls."""
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    for a in records.attempts:
        by_kind[a.kind][a.state] += 1
    return {
        "attempts": len(records.attempts),
        "attempts_by_kind": {k: dict(v) for k, v in sorted(by_kind.items())},
        "results_recorded": sum(a.has_result for a in records.attempts),
        "retried_attempts": sorted(a.id for a in records.attempts if a.tries > 1),
        "candidates": len(records.candidates),
        "measurements": len(records.measurements),
        "pulls_finished": len(records.pulls),
        "jobs_by_status": dict(Counter(j.status for j in records.jobs)),
    }


def merged_seconds(intervals: Iterable[tuple[float, float]], window: tuple[float, float]) -> float:
    """Length of the union of `intervals` inside `window` (overlaps counted once)."""
    lo, hi = window
    clipped = sorted((max(a, lo), min(b, hi)) for a, b in intervals if min(b, hi) > max(a, lo))
    total, end = 0.0, lo
    for start, stop in clipped:
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def measuring_attempts(attempts: Iterable[AttemptRow], queue: str) -> list[AttemptRow]:
    """Finished profile/verify attempts of the measuring worker's queue that a worker took."""
    return [a for a in attempts if a.queue == queue and a.kind in MEASURING_KINDS
            and a.started_at is not None and a.finished_at is not None]


def busy_by_worker(attempts: Iterable[AttemptRow], queue: str, window: tuple[float, float],
                   workers: Sequence[str], worker_count: int) -> dict[str, Any]:
    """Each measuring worker's busy share and the fleet's, over `window`.

    Per worker: the union of started -> finished of the attempts it answered (the attempt's
    last try), divided by the window. Overall: the sum of those seconds divided by
    `worker_count` x the window. `workers` are listed even when they took nothing; attempts
    whose worker is unknown count under "unknown".
    """
    span = window[1] - window[0]
    held: dict[str, list[tuple[float, float]]] = {name: [] for name in workers}
    for a in measuring_attempts(attempts, queue):
        held.setdefault(a.worker or "unknown", []).append((a.started_at or 0.0,
                                                           a.finished_at or 0.0))
    seconds = {name: merged_seconds(spans, window) for name, spans in sorted(held.items())}
    if span <= 0 or worker_count < 1:
        return {"per_worker": {n: None for n in seconds}, "overall": None,
                "held_s": seconds, "workers": worker_count, "window_s": span}
    return {"per_worker": {n: s / span for n, s in seconds.items()},
            "overall": sum(seconds.values()) / (worker_count * span),
            "held_s": seconds, "workers": worker_count, "window_s": span}


def active_window(attempts: Iterable[AttemptRow], queue: str) -> tuple[float, float]:
    """From the first dispatch to the last finish of the measuring queue's attempts."""
    rows = [a for a in attempts if a.queue == queue and a.dispatched_at and a.finished_at]
    if not rows:
        return (0.0, 0.0)
    return (min(a.dispatched_at or 0.0 for a in rows), max(a.finished_at or 0.0 for a in rows))


def aggregate_stages(per_job: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Suite-wide time per step from each job's GET /v1/jobs/{id}/stages answer.

    Per kind: finished and failed attempts, total worker seconds, mean seconds per attempt,
    the median of the jobs' medians and of their queue waits, and the median of each part.
    """
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for stages in per_job:
        for stage in stages:
            grouped[str(stage["kind"])].append(stage)
    order = ("generate", "compile", "profile", "verify")
    rows = []
    for kind in sorted(grouped, key=lambda k: (order.index(k) if k in order else 99, k)):
        items = grouped[kind]
        finished = sum(int(s["finished"]) for s in items)
        total = sum(float(s["work_total_s"]) for s in items)
        waits = [float(s["wait_median_s"]) for s in items if s.get("wait_median_s") is not None]
        parts: dict[str, list[float]] = defaultdict(list)
        for s in items:
            for name, seconds in (s.get("parts") or {}).items():
                parts[name].append(float(seconds))
        rows.append({"kind": kind, "finished": finished,
                     "failed": sum(int(s.get("failed", 0)) for s in items),
                     "work_total_s": total, "work_mean_s": total / finished if finished else None,
                     "work_median_s": median(float(s["work_median_s"]) for s in items),
                     "wait_median_s": median(waits) if waits else None,
                     "parts_median_s": {n: median(v) for n, v in sorted(parts.items())}})
    return rows
