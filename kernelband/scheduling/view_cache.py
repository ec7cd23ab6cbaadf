"""What this scheduler last committed to the derived view tables, so unchanged rows stay unsent.

The arm/cluster views are rewritten from the policy state whenever it changes, but a reward
changes one arm's counts and one cluster's members; the other rows would be sent, compared by
Postgres and left as they were. This per-process cache holds the compared values of every view
row a committed transaction of this process wrote, and `changed_rows` drops the rows that
match. It is trusted only while this process is the only writer: it belongs to one engine and
one leader epoch (a takeover by anyone, this process included, starts it empty), and rows
enter it only after their transaction committed (a rollback forgets them). It also holds when
each track's view was last written (`view_due`), which bounds how often a view is rewritten.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Sequence
from itertools import repeat
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

RowKey = tuple[str, tuple[Any, ...]]
_WRITTEN: weakref.WeakKeyDictionary[Engine, tuple[int | None, dict[RowKey, Any]]] = (
    weakref.WeakKeyDictionary())
MAX_ROWS = 200_000  # oldest forgotten first; a forgotten row is simply sent again
EPOCH = "kb_leader_epoch"  # session.info: the epoch `verify_epoch` checked (None: embedded)
_PENDING = "kb_view_rows"
_LISTENING = "kb_view_rows_listening"


def changed_rows(session: Session, table: str, rows: Sequence[dict[str, Any]],
                 keys: Sequence[str], compared: Sequence[str]) -> list[dict[str, Any]]:
    """The rows whose compared values differ from what this process last committed; they are
    remembered, to count as written once this transaction commits."""
    written = _written(session)
    pending: dict[RowKey, Any] = session.info.setdefault(_PENDING, {})
    changed = []
    for row in rows:
        key = (table, tuple(row[name] for name in keys))
        values = _frozen([row[name] for name in compared])
        if written is not None and written.get(key) == values:
            continue
        changed.append(row)
        pending[key] = values
    _listen(session)
    return changed


def view_due(session: Session, track_id: int, interval_s: float, part: str = "view") -> bool:
    """Whether this process last committed this `part` of the track's view at least
    `interval_s` ago (or never, under this engine and leader epoch)."""
    written = _written(session)
    last = None if written is None else written.get((f"{part}_written_at", (track_id,)))
    return last is None or time.monotonic() - last >= interval_s


def note_view_written(session: Session, track_id: int, part: str = "view") -> None:
    """This `part` of the track's view goes out with this transaction (counted once it
    commits)."""
    session.info.setdefault(_PENDING, {})[(f"{part}_written_at", (track_id,))] = time.monotonic()
    _listen(session)


def _listen(session: Session) -> None:
    if not session.info.get(_LISTENING):  # once per session
        session.info[_LISTENING] = True
        event.listen(session, "after_commit", _publish)
        event.listen(session, "after_soft_rollback", _discard)


def _frozen(value: Any) -> Any:
    """Lists as tuples (hashable, and safe from later changes to the state they came from)."""
    if not isinstance(value, list | tuple):
        return value
    if not any(map(isinstance, value, repeat((list, tuple)))):  # flat: members, centroids (in C)
        return tuple(value)
    return tuple(_frozen(v) for v in value)


def _written(session: Session) -> dict[RowKey, Any] | None:
    """This engine's committed rows for the epoch this transaction checked; None: no engine."""
    bind = session.get_bind()
    engine = bind.engine if isinstance(bind, Connection) else bind
    if not isinstance(engine, Engine):
        return None
    epoch = session.info.get(EPOCH)
    held = _WRITTEN.get(engine)
    if held is None or held[0] != epoch:
        held = _WRITTEN[engine] = (epoch, {})
    return held[1]


def _publish(session: Session) -> None:
    """after_commit: the rows this transaction wrote are now what the tables hold."""
    pending = session.info.pop(_PENDING, None)
    written = _written(session) if pending else None
    if not pending or written is None:
        return
    written.update(pending)
    while len(written) > MAX_ROWS:
        written.pop(next(iter(written)))


def _discard(session: Session, _previous: Any) -> None:
    """after_soft_rollback: nothing of this transaction was written."""
    session.info.pop(_PENDING, None)


def clear_cache() -> None:
    """Forget every remembered row (tests; a process that rewrote view rows some other way)."""
    _WRITTEN.clear()


__all__ = ["EPOCH", "changed_rows", "clear_cache", "note_view_written", "view_due"]
