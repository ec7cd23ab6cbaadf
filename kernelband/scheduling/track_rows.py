"""Changed track rows of a flush written in one statement (Postgres), version counters checked.

A `tracks` row carries an optimistic version counter (`Track.version`), and the ORM writes each
versioned row with an UPDATE of its own, so a pass that touched 100 tracks sent 100 UPDATEs.
`batch_track_updates` makes a session write the changed tracks of each flush together:
`UPDATE tracks SET ... FROM json_populate_recordset(NULL::tracks, :rows) AS changed WHERE
tracks.id = changed.id AND tracks.version = changed.version RETURNING tracks.id`, one statement
per set of changed columns, its rows one JSON parameter (`json_rows`; a VALUES list for rows
with a NaN or infinite float). Every row's version is bumped
as the ORM would; a row whose version did not match raises `StaleDataError`, as the ORM would,
which rolls the transaction back. The written values are then marked committed on the objects,
so the ORM's own flush has nothing left to write for them.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy import (
    Integer,
    TextClause,
    Update,
    cast,
    column,
    event,
    inspect,
    text,
    update,
    values,
)
from sqlalchemy.orm import Session, UOWTransaction
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.exc import StaleDataError

from kernelband.db.json_rows import portable, records_param
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
    if all(portable(row) for row in rows):
        records = [dict(zip(("id", "version", *keys), row, strict=True)) for row in rows]
        result = session.connection().execute(_recordset_update(keys), records_param(records))
    else:
        result = session.connection().execute(_values_update(keys, rows))
    written = set(result.scalars())
    missing = sorted({track.id for track in tracks} - written)
    if missing:
        raise StaleDataError(f"tracks {missing} were changed by another writer (version "
                             "mismatch); this transaction is rolled back")
    for track in tracks:
        for key in keys:
            set_committed_value(track, key, getattr(track, key))
        set_committed_value(track, "version", track.version + 1)


@lru_cache(maxsize=64)
def _recordset_update(keys: tuple[str, ...]) -> TextClause:
    """The UPDATE for one set of changed columns, its rows one JSON array parameter (`:rows`).

    Its text depends on the column names only, so it is compiled once; a VALUES list of N rows
    is compiled again for every flush, which took longer than the UPDATE itself. Postgres reads
    each JSON record into the tracks row type (`json_populate_recordset`), so every column
    keeps its own type; a JSON column's value is taken as it stands."""
    assignments = ", ".join(f"{key} = changed.{key}" for key in keys)  # names from COLUMNS
    return text(f"UPDATE tracks SET {assignments}, version = tracks.version + 1 "
                "FROM json_populate_recordset(NULL::tracks, :rows) AS changed "
                "WHERE tracks.id = changed.id AND tracks.version = changed.version "
                "RETURNING tracks.id")


def _values_update(keys: tuple[str, ...], rows: list[tuple[Any, ...]]) -> Update:
    """The same UPDATE with the rows in a VALUES list (any column type, compiled per call)."""
    changed = values(column("id", Integer), column("version", Integer),
                     *(column(key, TRACKS.c[key].type) for key in keys),
                     name="changed").data(rows)
    assignments: dict[Any, Any] = {TRACKS.c[key]: cast(changed.c[key], TRACKS.c[key].type)
                                   for key in keys}
    assignments[TRACKS.c.version] = TRACKS.c.version + 1
    return (update(TRACKS)
            .where(TRACKS.c.id == changed.c.id, TRACKS.c.version == changed.c.version)
            .values(assignments).returning(TRACKS.c.id))


__all__ = ["batch_track_updates", "changed_columns", "write_tracks"]
