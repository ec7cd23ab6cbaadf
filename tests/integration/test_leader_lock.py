"""The leader lock on real Postgres: one holder, epochs increase, stale leaders are fenced."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.session import session_scope
from kernelband.scheduling.fencing import FencingError, verify_epoch
from services.scheduler.leader import LeaderLock, PostgresRequiredError

pytestmark = pytest.mark.integration


def test_one_holder_and_epochs_increase_on_takeover(
        postgres_url: str, factory: sessionmaker[Session]) -> None:
    first, second = LeaderLock(postgres_url, "a", factory), LeaderLock(postgres_url, "b", factory)
    try:
        base = first.try_acquire()
        assert base is not None and first.still_held()
        assert second.try_acquire() is None and not second.still_held()
        first.release()
        assert not first.still_held()
        assert second.try_acquire() == base + 1
    finally:
        first.dispose()
        second.dispose()


def test_a_stale_leader_can_not_commit(postgres_url: str, factory: sessionmaker[Session]) -> None:
    old, new = LeaderLock(postgres_url, "old", factory), LeaderLock(postgres_url, "new", factory)
    try:
        stale = old.try_acquire()
        assert stale is not None
        old._drop_connection()  # its connection died: Postgres released the lock
        current = new.try_acquire()
        assert current == stale + 1
        with pytest.raises(FencingError), session_scope(factory) as session:
            verify_epoch(session, stale)
        with session_scope(factory) as session:
            verify_epoch(session, current)
    finally:
        old.dispose()
        new.dispose()


def test_sqlite_is_refused_with_advice(factory: sessionmaker[Session]) -> None:
    with pytest.raises(PostgresRequiredError, match="embedded mode"):
        LeaderLock("sqlite:///x.sqlite", "a", factory)


def test_a_bare_postgresql_url_works_as_operators_write_it(
        postgres_url: str, factory: sessionmaker[Session]) -> None:
    """docker-compose writes `postgresql://`; SQLAlchemy 2.1 would pick a driver we do not ship."""
    bare = "postgresql://" + postgres_url.split("://", 1)[1]
    lock = LeaderLock(bare, "bare", factory)
    try:
        assert lock.try_acquire() is not None
    finally:
        lock.release()
        lock.dispose()
