"""Changed track rows of a flush written in one statement (Postgres), version counters checked.

A `tracks` row carries an optimistic version counter (`Track.version`), and the ORM writes each
versioned row with an UPDATE of its own, so a pass that touched 100 tracks sent 100 UPDATEs.
`batch_track_updates` makes a session write the changed tracks of each flush together:
`UPDATE tracks SET ... FROM (VALUES ...) WHERE tracks.id = v.id AND tracks.version = v.version
RETURNING tracks.id`, one statement per set of changed columns. Every row's version is bumped
as the ORM would; a row whose version did not match raises `StaleDataError`, as the ORM would,
which rolls the transaction back. The written values are then marked committed on the objects,
so the ORM's own flush has nothing left to write for them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, cast, column, event, inspect, update, values
from sqlalchemy.orm import Session, UOWTransaction
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.exc import StaleDataError

from kernelband.db.models import Track

TRACKS = Track.metadata.tables[Track.__tablename__]
COLUMNS = [attr.key for attr in inspect(Track).column_attrs if attr.key not in ("id", "version")]


def batch_track_updates(session: Session) -> None:
    """Write this session's changed tracks one statement per flush (Postgres only)."""
    if session.get_bind().dialect.name != "postgresql":
        return  # elsewhere the ORM's row-by-row UPDATE stays (SQLite is local anyway)
    if not event.contains(session, "before_flush", _write_changed_tracks):
        event.listen(session, "before_flush", _write_changed_tracks)


def _write_changed_tracks(session: Session, _context: UOWTransaction, _instances: Any) -> None:
    """before_flush: the changed tracks, grouped by which columns changed."""
    groups: dict[tuple[str, ...], list[Track]] = {}
    for obj in session.dirty:
        if isinstance(obj, Track) and inspect(obj).has_identity:
            keys = changed_columns(obj)
            if keys:
                groups.setdefault(keys, []).append(obj)
    if sum(len(tracks) for tracks in groups.values()) < 2:
        return  # one row: the ORM's own UPDATE is one statement too
    for keys, tracks in groups.items():
        write_tracks(session, keys, tracks)


def changed_columns(track: Track) -> tuple[str, ...]:
    """Names of the track's columns with a net change since they were loaded or written."""
    attrs = inspect(track).attrs
    return tuple(key for key in COLUMNS if attrs[key].history.has_changes())


def write_tracks(session: Session, keys: tuple[str, ...], tracks: list[Track]) -> None:
    """One versioned UPDATE of `keys` for every track; each track's values then count as
    committed, with its version bumped."""
    rows = [(track.id, track.version, *(getattr(track, key) for key in keys)) for track in tracks]
    changed = values(column("id", Integer), column("version", Integer),
                     *(column(key, TRACKS.c[key].type) for key in keys),
                     name="changed").data(rows)
    assignments: dict[Any, Any] = {TRACKS.c[key]: cast(changed.c[key], TRACKS.c[key].type)
                                   for key in keys}
    assignments[TRACKS.c.version] = TRACKS.c.version + 1
    statement = (update(TRACKS)
                 .where(TRACKS.c.id == changed.c.id, TRACKS.c.version == changed.c.version)
                 .values(assignments).returning(TRACKS.c.id))
    written = set(session.connection().execute(statement).scalars())
    missing = sorted({track.id for track in tracks} - written)
    if missing:
        raise StaleDataError(f"tracks {missing} were changed by another writer (version "
                             "mismatch); this transaction is rolled back")
    for track in tracks:
        for key in keys:
            set_committed_value(track, key, getattr(track, key))
        set_committed_value(track, "version", track.version + 1)


__all__ = ["batch_track_updates", "changed_columns", "write_tracks"]
