"""The scheduler loop keeps running when Postgres fails while it takes the leader lock."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy.orm import Session, sessionmaker

from services.scheduler.leader import LeaderLock
from services.scheduler.loop import take_lock


def test_a_database_failure_while_taking_the_lock_is_a_retry_not_an_exit(
        postgres_factory: sessionmaker[Session], caplog: pytest.LogCaptureFixture) -> None:
    unreachable = LeaderLock("postgresql://nobody@127.0.0.1:1/none", "replica-x",
                             postgres_factory)  # nothing listens on port 1
    with caplog.at_level(logging.WARNING):
        assert take_lock(unreachable, "replica-x") is None
        assert take_lock(unreachable, "replica-x") is None  # and again at the next poll
    assert "could not take the leader lock" in caplog.text
    unreachable.dispose()
