"""The view cache: rows this process committed are not sent again unchanged; a rollback or a
new leader epoch makes every row count as unsent."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.session import session_scope
from kernelband.scheduling.view_cache import EPOCH, changed_rows, clear_cache

KEYS, COMPARED = ("track_id", "cluster"), ("members", "size")


def rows(*sizes: int) -> list[dict[str, Any]]:
    return [{"track_id": 1, "cluster": c, "members": [str(i) for i in range(n)], "size": n}
            for c, n in enumerate(sizes)]


def offer(factory: sessionmaker[Session], offered: list[dict[str, Any]], epoch: int | None = None,
          commit: bool = True) -> int:
    """How many of `offered` count as changed, in a transaction that commits or rolls back."""
    session = factory()
    try:
        session.info[EPOCH] = epoch
        changed = len(changed_rows(session, "clusters", offered, KEYS, COMPARED))
        session.commit() if commit else session.rollback()
        return changed
    finally:
        session.close()


def test_only_rows_that_differ_from_the_committed_ones_are_sent(
        sqlite_factory: sessionmaker[Session]) -> None:
    clear_cache()
    assert offer(sqlite_factory, rows(3, 4, 5)) == 3
    assert offer(sqlite_factory, rows(3, 4, 5)) == 0
    assert offer(sqlite_factory, rows(3, 6, 5)) == 1  # one cluster gained members


def test_a_rolled_back_write_is_sent_again(sqlite_factory: sessionmaker[Session]) -> None:
    clear_cache()
    assert offer(sqlite_factory, rows(3), commit=False) == 1
    assert offer(sqlite_factory, rows(3)) == 1
    with session_scope(sqlite_factory):
        pass  # an unrelated commit publishes nothing
    assert offer(sqlite_factory, rows(3)) == 0


def test_a_new_leader_epoch_trusts_nothing_remembered(
        sqlite_factory: sessionmaker[Session]) -> None:
    clear_cache()
    assert offer(sqlite_factory, rows(3, 4), epoch=5) == 2
    assert offer(sqlite_factory, rows(3, 4), epoch=5) == 0
    assert offer(sqlite_factory, rows(3, 4), epoch=6) == 2  # another leader may have written
    assert offer(sqlite_factory, rows(3, 4), epoch=5) == 2  # and back: still nothing trusted
