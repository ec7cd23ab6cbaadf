"""No duplicate evaluations: a child whose normalised source is already in the track is
recorded as a duplicate of that candidate, with its outcome, and never compiled or measured."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.db.models import Candidate, Job, Measurement, Track

_PREFETCHED = "kb_same_source"  # session.info: (track, hash) -> candidates, for a result batch


def prefetch_same_source(session: Session, children: list[Candidate]) -> None:
    """One read of every candidate sharing a track and normalised source with these children,
    so that a batch of generate results looks duplicates up without a query per result."""
    keys = {(c.track_id, c.source_hash) for c in children if c.source_hash is not None}
    if not keys:
        return
    # The tracks are a filter, not an index read: their index holds every candidate a track
    # ever had (thousands, more with every pull), while each source hash matches a few rows.
    query = (select(Candidate).where((Candidate.track_id + 0).in_(sorted({t for t, _ in keys})),
                                     Candidate.source_hash.in_(sorted({h for _, h in keys})),
                                     Candidate.status != "duplicate")
             .order_by(Candidate.id))
    found: dict[tuple[int, str], list[Candidate]] = {key: [] for key in keys}
    for candidate in session.scalars(query):
        found.get((candidate.track_id, candidate.source_hash or ""), []).append(candidate)
    session.info.setdefault(_PREFETCHED, {}).update(found)


def find_duplicate(session: Session, job: Job, child: Candidate) -> Candidate | None:
    """The first candidate of the child's track with the same normalised source, if any."""
    if not job.dedupe or child.source_hash is None:
        return None
    prefetched = session.info.get(_PREFETCHED, {}).get((child.track_id, child.source_hash))
    if prefetched is not None:
        return next((c for c in prefetched if c.id != child.id and c.status != "duplicate"), None)
    query = (select(Candidate).where(Candidate.track_id == child.track_id,
                                     Candidate.source_hash == child.source_hash,
                                     Candidate.status != "duplicate", Candidate.id != child.id)
             .order_by(Candidate.id).limit(1))
    return session.scalars(query).first()


def duplicate_outcome(session: Session, track: Track, original: Candidate) -> str:
    """The original's outcome in words: 'measured 1.23x (estimated)', 'rejected: timeout', ..."""
    if original.status == "measured":
        query = (select(Measurement).where(Measurement.candidate_id == original.id,
                                           Measurement.target == track.target)
                 .order_by(Measurement.id.desc()).limit(1))
        measurement = session.scalars(query).first()
        if measurement is not None and track.original_time_ms:
            speedup = track.original_time_ms / measurement.time_ms
            return f"measured {speedup:.3f}x ({measurement.label})"
        return "measured"
    if original.status == "rejected":
        return f"rejected: {original.reason or 'rejected'}"
    return "still in evaluation"


def mark_duplicate(session: Session, track: Track, child: Candidate, original: Candidate) -> str:
    """Record the child as a duplicate of `original`; returns the outcome text."""
    outcome = duplicate_outcome(session, track, original)
    child.status, child.duplicate_of = "duplicate", original.id
    child.reason = f"duplicate_of:{original.id} ({outcome})"
    return outcome
