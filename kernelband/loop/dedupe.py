"""No duplicate evaluations: a child whose normalised source is already in the track is
recorded as a duplicate of that candidate, with its outcome, and never compiled or measured."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, String, bindparam, func, select, true
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session, aliased

from kernelband.db.models import Candidate, Job, Measurement, Track

_PREFETCHED = "kb_same_source"  # session.info: (track, hash) -> candidates, for a result batch


def prefetch_same_source(session: Session, children: list[Candidate]) -> None:
    """One read of every candidate sharing a track and normalised source with these children,
    so that a batch of generate results looks duplicates up without a query per result."""
    keys = {(c.track_id, c.source_hash) for c in children if c.source_hash is not None}
    if not keys:
        return
    found: dict[tuple[int, str], list[Candidate]] = {key: [] for key in keys}
    pairs = sorted(keys)  # the tracks and hashes side by side: pair i is (tracks[i], hashes[i])
    wanted = {"tracks": [t for t, _ in pairs], "hashes": [h for _, h in pairs]}
    for candidate in session.scalars(_same_source(session), wanted):
        found.get((candidate.track_id, candidate.source_hash or ""), []).append(candidate)
    session.info.setdefault(_PREFETCHED, {}).update(found)


def _same_source(session: Session) -> Any:
    """The read of the candidates of the (track, source) pairs `:tracks` and `:hashes`
    (duplicates left out), by id, for this session's database (on SQLite also those of a
    track with another pair's source, which the caller ignores)."""
    if session.get_bind().dialect.name != "postgresql":  # no lateral join (SQLite: tests)
        return _SAME_SOURCE
    return _SAME_SOURCE_PROBED


# The tracks are a filter, not an index read: their index holds every candidate a track ever
# had (thousands, more with every pull), while each source hash matches a few rows.
_SAME_SOURCE = (select(Candidate)
                .where(Candidate.source_hash.in_(bindparam("hashes", expanding=True)),
                       (Candidate.track_id + 0).in_(bindparam("tracks", expanding=True)),
                       Candidate.status != "duplicate")
                .order_by(Candidate.id))
# On Postgres each pair is its own probe of the (source, track) index (a lateral join kept one
# by `OFFSET 0`): for an IN list of 60 hashes a planner without fresh statistics guessed
# thousands of rows and read the whole table (22 ms at 133,000 candidates), a read that grew
# every pull; and a probe by source alone read that source's rows of every track.
_WANTED = func.unnest(bindparam("hashes", type_=ARRAY(String)),
                      bindparam("tracks", type_=ARRAY(Integer))).table_valued(
    "hash", "track").render_derived(name="wanted")
_SAME = aliased(Candidate, select(Candidate)
                .where(Candidate.source_hash == _WANTED.c.hash,
                       Candidate.track_id == _WANTED.c.track, Candidate.status != "duplicate")
                .offset(0).lateral("same"))
_SAME_SOURCE_PROBED = select(_SAME).select_from(_WANTED).join(_SAME, true()).order_by(_SAME.id)


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
