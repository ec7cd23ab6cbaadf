"""A per-process cache of parsed policy states, keyed by the committed row version.

Parsing a track's policy state (JSON with every frontier entry) dominated scheduler passes on
large frontiers. A state is cached only once the transaction that wrote it has committed, with
the track row's `version` (SQLAlchemy bumps it on every ORM update of the row), so a hit is
exactly the committed content: another writer, a failover or a rollback changes or keeps the
version, never a stale entry. Writes that bypass the ORM version counter are not supported.
Only the newest committed version of each track is kept: an older one can never be read again,
and thousands of superseded states (each with its frontier list) made every full garbage
collection of the scheduler walk them.

The leader keeps its tracks' states hot: a cached state may be newer than the track row's
stored one (`state.save_state` writes it back at most every `Settings.state_writeback_s`).
Per engine this module also remembers when each track's state was last written back and
which tracks hold a state newer than their row (`dirty_tracks`), both as of commit.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable
from typing import Any

from sqlalchemy import event, inspect
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import PASSIVE_NO_INITIALIZE, get_history

from kernelband.bandit import PolicyState
from kernelband.db.models import Track
from kernelband.scheduling.events import forget_event_counters

TrackKey = tuple[int, int, Any]  # (track id, job id, start time)
Cache = dict[TrackKey, tuple[int, PolicyState]]  # -> (row version, the state it holds)
_CACHES: weakref.WeakKeyDictionary[Engine, Cache] = weakref.WeakKeyDictionary()
MAX_ENTRIES = 4096  # tracks; a scheduler's running tracks fit many times over
_PENDING = "kb_policy_states"
_LISTENING = "kb_policy_listening"
_WRITES = "kb_policy_writes"  # track id -> written back (True) or kept hot (False), this transaction


class WriteBacks:
    """Per engine: when each track's state was last written back (time.monotonic), and the
    tracks whose cached state is newer than their stored row."""

    def __init__(self) -> None:
        self.written_at: dict[int, float] = {}
        self.dirty: set[int] = set()


_WRITE_BACKS: weakref.WeakKeyDictionary[Engine, WriteBacks] = weakref.WeakKeyDictionary()


def cached_state(session: Session, track: Track, copy: bool = True) -> PolicyState | None:
    """A copy of the state of `track` this transaction saved, else of its committed state
    when this process parsed it before (`copy` False: the cached object itself, to be read
    only)."""
    pending = session.info.get(_PENDING, {}).get(id(track))
    if pending is not None and pending[0] is track:  # saved earlier in this transaction
        return copy_state(pending[1]) if copy else pending[1]
    # The attribute's own history: `inspect(track).attrs` builds a view of every column of the
    # row (about 40 objects per track, in reference cycles the collector then had to walk).
    if get_history(track, "policy_state", PASSIVE_NO_INITIALIZE).has_changes():
        return None  # written in this transaction and not flushed yet: the row is not current
    key, cache = _key(track), _cache(session)
    hit = cache.get(key[:3]) if key is not None and cache is not None else None
    if hit is None or key is None or hit[0] != key[3]:
        return None
    return copy_state(hit[1]) if copy else hit[1]


def held_state(session: Session, track_id: int, job_id: int, started_at: Any,
               version: int) -> PolicyState | None:
    """The committed state this process holds for the track row of this version (read only),
    from the row's identifying columns, without a `Track` object; None when it holds none."""
    cache = _cache(session)
    hit = cache.get((track_id, job_id, started_at)) if cache is not None else None
    return hit[1] if hit is not None and hit[0] == version else None


def held_states(session: Session,
                rows: Iterable[tuple[int, int, Any, int]]) -> dict[int, PolicyState]:
    """`held_state` of many tracks, each (track id, job id, start time, row version): the
    states held by track id (read only); a track this process holds none for is left out."""
    cache = _cache(session)
    if cache is None:
        return {}
    held: dict[int, PolicyState] = {}
    for track_id, job_id, started_at, version in rows:
        hit = cache.get((track_id, job_id, started_at))
        if hit is not None and hit[0] == version:
            held[track_id] = hit[1]
    return held


def remember_state(session: Session, track: Track, state: PolicyState,
                   stored: dict[str, Any] | None = None) -> None:
    """Cache `state` under the track's version once this commits; `stored`: what was written
    for it (the cache then holds what a parse of that gives); None: kept hot, not written."""
    if stored is not None:
        # What a parse of `stored` would give, so cached and parsed runs decide identically:
        # the small fields are parsed; frontier entries already hold plain floats.
        canonical = PolicyState.from_dict({**stored, "frontier": []})
        canonical.frontier = list(state.frontier)
        canonical.derived = state.derived  # arrays the policy derived; checked before each use
        state = canonical
    _listen(session)
    session.info.setdefault(_PENDING, {})[id(track)] = (track, state)


def saved_states(session: Session) -> dict[int, tuple[Track, PolicyState]]:
    """The track object and state this transaction last saved, by track id."""
    return {track.id: (track, state) for track, state in session.info.get(_PENDING, {}).values()}


def forget_state(session: Session, track: Track) -> None:
    """Drop what `remember_state` kept for this track object in this transaction."""
    session.info.get(_PENDING, {}).pop(id(track), None)


def note_write_back(session: Session, track_id: int, written: bool) -> None:
    """Record, as of this commit, that the track's state was written back or kept hot."""
    _listen(session)
    session.info.setdefault(_WRITES, {})[track_id] = written


def write_back_due(session: Session, track_id: int, interval_s: float) -> bool:
    """Whether the track's state was last written back `interval_s` or more ago (never: due)."""
    books = _write_backs(session)
    last = books.written_at.get(track_id) if books is not None else None
    return last is None or time.monotonic() - last >= interval_s


def dirty_tracks(session: Session, older_than_s: float = 0.0) -> list[int]:
    """Tracks whose cached state is newer than their row, last written `older_than_s` ago."""
    books = _write_backs(session)
    if books is None:
        return []
    now = time.monotonic()
    return sorted(t for t in books.dirty
                  if now - books.written_at.get(t, float("-inf")) >= older_than_s)


def _listen(session: Session) -> None:
    if not session.info.get(_LISTENING):  # once per session; listeners cannot be removed mid-event
        session.info[_LISTENING] = True
        event.listen(session, "after_commit", _publish)
        event.listen(session, "after_soft_rollback", _discard)


def copy_state(state: PolicyState) -> PolicyState:
    """A copy whose containers are its own, so callers may change it freely."""
    return state.copy()


def _publish(session: Session) -> None:
    """after_commit: the states written in this transaction are now the committed ones."""
    pending = session.info.pop(_PENDING, {})
    _publish_write_backs(session, session.info.pop(_WRITES, {}))
    cache = _cache(session)
    if cache is None:
        return
    for track, state in pending.values():
        key = _key(track)
        if key is not None:
            cache.pop(key[:3], None)  # re-inserted last: dict order stays least recently saved
            cache[key[:3]] = (key[3], state)
    while len(cache) > MAX_ENTRIES:  # least recently saved first (dict order)
        cache.pop(next(iter(cache)))


def _publish_write_backs(session: Session, writes: dict[int, bool]) -> None:
    books = _write_backs(session)
    if books is None or not writes:
        return
    now = time.monotonic()
    for track_id, written in writes.items():
        if written:
            books.written_at[track_id] = now
            books.dirty.discard(track_id)
        else:
            books.dirty.add(track_id)


def _discard(session: Session, _previous: Any) -> None:
    """after_soft_rollback: nothing written in this transaction was committed."""
    session.info.pop(_PENDING, None)
    session.info.pop(_WRITES, None)


def _key(track: Track) -> tuple[int, int, Any, int] | None:
    """(id, job, start time, version), read without loading anything; None if not loaded."""
    loaded = inspect(track).dict
    if any(name not in loaded for name in ("id", "job_id", "version")):
        return None
    return (loaded["id"], loaded["job_id"], loaded.get("started_at"), loaded["version"])


def _engine(session: Session) -> Engine | None:
    bind = session.get_bind()
    engine = bind.engine if isinstance(bind, Connection) else bind
    return engine if isinstance(engine, Engine) else None


def _cache(session: Session) -> Cache | None:
    engine = _engine(session)
    return None if engine is None else _CACHES.setdefault(engine, {})


def _write_backs(session: Session) -> WriteBacks | None:
    engine = _engine(session)
    return None if engine is None else _WRITE_BACKS.setdefault(engine, WriteBacks())


def clear_cache() -> None:
    """Forget every cached state and write-back, and the jobs' last event numbers (tests; a
    process that rewrote rows outside the ORM; a scheduler that takes the lead again after
    another leader ran)."""
    _CACHES.clear()
    _WRITE_BACKS.clear()
    forget_event_counters()


__all__ = ["cached_state", "clear_cache", "copy_state", "dirty_tracks", "forget_state", "held_state",
           "held_states", "saved_states",
           "note_write_back",
           "remember_state", "write_back_due"]
