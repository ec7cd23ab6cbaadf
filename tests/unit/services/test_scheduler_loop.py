"""The scheduler loop: it keeps running when Postgres fails while it takes the leader lock, and
its passes are fenced and bounded as the settings say."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.scheduling.dispatch import InboxDispatcher
from services.scheduler.leader import LeaderLock
from services.scheduler.loop import leader_context, take_lock


def test_a_database_failure_while_taking_the_lock_is_a_retry_not_an_exit(
        postgres_factory: sessionmaker[Session], caplog: pytest.LogCaptureFixture) -> None:
    unreachable = LeaderLock("postgresql://nobody@127.0.0.1:1/none", "replica-x",
                             postgres_factory)  # nothing listens on port 1
    with caplog.at_level(logging.WARNING):
        assert take_lock(unreachable, "replica-x") is None
        assert take_lock(unreachable, "replica-x") is None  # and again at the next poll
    assert "could not take the leader lock" in caplog.text
    unreachable.dispose()


def test_the_leader_fences_and_bounds_its_passes_by_its_settings(
        sqlite_factory: sessionmaker[Session]) -> None:
    settings = Settings(select_budget_ms=12.5, housekeeping_interval_s=0.25)
    ctx = leader_context(sqlite_factory, InboxDispatcher(), settings, epoch=7)
    assert (ctx.leader_epoch, ctx.housekeeping_s, ctx.select_budget_s) == (7, 0.25, 0.0125)
    assert leader_context(sqlite_factory, InboxDispatcher(), Settings(select_budget_ms=0),
                          epoch=8).selection_budget() is None  # 0: no time bound
