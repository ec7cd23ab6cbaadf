"""One leader among scheduler replicas: a Postgres advisory lock plus a fenced epoch.

The lock lives on a dedicated connection (session-level lock: it is released when that
connection dies). Each takeover increments `leader_epoch.epoch`
(kernelband.scheduling.fencing.claim_leadership); every write transaction of the engine checks
that the epoch is still its own, so a leader that lost its lock and did not notice yet can not
commit.
"""

from __future__ import annotations

import logging
from contextlib import suppress

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from kernelband.db.session import normalize_url, session_scope
from kernelband.scheduling.fencing import claim_leadership

log = logging.getLogger(__name__)

# Arbitrary 64-bit key ("KBSCHED" in hex-ish); unique to this service within a database.
LEADER_LOCK_KEY = 0x4B42_5343_4845_4400


class PostgresRequiredError(RuntimeError):
    """The distributed scheduler needs Postgres (advisory locks)."""


def require_postgres(database_url: str) -> None:
    """Refuse anything but Postgres: SQLite has no advisory locks."""
    if not database_url.startswith("postgresql"):
        raise PostgresRequiredError(
            "the scheduler process needs a Postgres KERNELBAND_DATABASE_URL "
            f"(got {database_url.split(':', 1)[0] or 'none'}); the embedded mode "
            "(`kernelband optimize`) runs without a scheduler process"
        )


class LeaderLock:
    """Try, check and release the scheduler leader lock for one database."""

    def __init__(self, database_url: str, holder: str, factory: sessionmaker[Session]) -> None:
        require_postgres(database_url)
        self.holder = holder
        self._factory = factory
        self.epoch: int | None = None
        self._engine: Engine = create_engine(normalize_url(database_url), poolclass=NullPool,
                                             isolation_level="AUTOCOMMIT")
        self._conn: Connection | None = None

    def try_acquire(self) -> int | None:
        """Take the lock if free; on success bump and return the new leader epoch."""
        if self._conn is None:
            self._conn = self._engine.connect()
        got = self._conn.execute(text("SELECT pg_try_advisory_lock(:k)"),
                                 {"k": LEADER_LOCK_KEY}).scalar()
        if not got:
            return None
        with session_scope(self._factory) as session:
            self.epoch = claim_leadership(session, self.holder)
        log.info("%s is the leader (epoch %s)", self.holder, self.epoch)
        return self.epoch

    def still_held(self) -> bool:
        """True while the lock connection is alive and this session still holds the lock."""
        if self._conn is None or self.epoch is None:
            return False
        try:
            held = self._conn.execute(text(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND pid = pg_backend_pid() AND ((classid::bigint << 32) | objid::bigint) = :k"),
                {"k": LEADER_LOCK_KEY}).scalar_one()
        except Exception as exc:  # a dead connection means the lock is gone
            log.warning("leader lock connection lost: %s", exc)
            self._drop_connection()
            return False
        return bool(held)

    def release(self) -> None:
        """Give the lock up (also implied when the process or its connection dies)."""
        if self._conn is not None:
            try:
                self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": LEADER_LOCK_KEY})
            except Exception as exc:  # the lock dies with the connection anyway
                log.warning("leader unlock failed: %s", exc)
        self._drop_connection()

    def _drop_connection(self) -> None:
        if self._conn is not None:
            with suppress(Exception):  # already broken: nothing left to close
                self._conn.close()
            self._conn = None
        self.epoch = None

    def dispose(self) -> None:
        self.release()
        self._engine.dispose()
