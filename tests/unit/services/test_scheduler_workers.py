"""The workers table: heartbeats and the attempt each worker is on (the fleet page's column)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import session_scope
from kernelband.db.models import Worker
from services.scheduler.workers import note_current, record_heartbeats
from services.worker.messages import Heartbeat


def test_a_lease_beat_names_the_attempt_and_its_result_clears_it() -> None:
    current: dict[str, int | None] = {}
    assert note_current(current, "gpu0@node", 7, lease_beat=True) is True
    assert current == {"gpu0@node": 7}
    assert note_current(current, "gpu0@node", 7, lease_beat=True) is False  # a later beat
    assert note_current(current, "gpu0@node", 7, lease_beat=False) is True
    assert current == {"gpu0@node": None}


def test_a_result_of_another_attempt_leaves_the_current_one() -> None:
    current: dict[str, int | None] = {"cpu@node": 9}
    assert note_current(current, "cpu@node", 8, lease_beat=False) is False
    assert current == {"cpu@node": 9}
    assert note_current(current, "", 3, lease_beat=True) is False  # no worker name: ignored


def test_heartbeats_record_the_current_attempt_of_known_workers(
        sqlite_factory: sessionmaker[Session]) -> None:
    beat = Heartbeat(worker="gpu0@node", queue="gpu.h100", target="h100",
                     gpu_name="NVIDIA H100", versions={}, sent_at=1_800_000_000.0)
    with session_scope(sqlite_factory) as session:
        record_heartbeats(session, [beat], {"gpu0@node": 12, "unknown@node": 3})
    with session_scope(sqlite_factory) as session:
        rows = {w.name: w.current_attempt_id for w in session.scalars(select(Worker))}
    assert rows == {"gpu0@node": 12}
    with session_scope(sqlite_factory) as session:
        record_heartbeats(session, [], {"gpu0@node": None})
    with session_scope(sqlite_factory) as session:
        assert session.scalars(select(Worker.current_attempt_id)).one() is None
