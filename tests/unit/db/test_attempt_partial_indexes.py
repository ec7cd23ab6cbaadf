"""Migration 0015: on Postgres the attempts' state index holds unfinished attempts only and the
finished index finished ones only, so finishing an attempt writes neither a state entry nor
(when it was inserted) a finished entry; the scheduler's and the API's reads still use them."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text

from kernelband.db.models import ACTIVE_ATTEMPTS_SQL
from kernelband.db.session import downgrade_database, make_engine, upgrade_database
from kernelband.scheduling.attempts import ACTIVE_ATTEMPT_STATES
from tests.utils.db_rows import old_schema_track

BEFORE = "0014_tracks_hot_updates"
INDEXES = ("ix_attempts_state_lease", "ix_attempts_finished_at")


def _attempts(engine: Engine, count: int, finished: int) -> None:
    """`count` dispatched attempts of track 1, the first `finished` of them then done."""
    with engine.begin() as conn:
        old_schema_track(conn)
        conn.execute(text(
            "INSERT INTO attempts (job_id, track_id, kind, state, queue, tries, payload, "
            "lease_expires_at, created_at) SELECT 1, 1, 'compile', 'dispatched', 'cpu', 1, '{}', "
            "now() + interval '300 seconds', now() FROM generate_series(1, :n)"), {"n": count})
        conn.execute(text("UPDATE attempts SET state = 'done', finished_at = now(), "
                          "lease_expires_at = NULL WHERE id <= :n"), {"n": finished})


def _entries(engine: Engine) -> dict[str, int]:
    """Entries of each index once VACUUM has dropped those of dead row versions."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM attempts"))
        rows = conn.execute(text("SELECT relname, reltuples FROM pg_class WHERE relname IN "
                                 "('ix_attempts_state_lease', 'ix_attempts_finished_at')"))
        return {name: int(tuples) for name, tuples in rows}


def _definitions(engine: Engine) -> dict[str, str]:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT indexname, indexdef FROM pg_indexes "
                                 "WHERE tablename = 'attempts'"))
        return {name: definition for name, definition in rows if name in INDEXES}


def test_the_active_states_of_the_index_are_the_schedulers() -> None:
    listed = ", ".join(f"'{state}'" for state in ACTIVE_ATTEMPT_STATES)
    assert f"state IN ({listed})" == ACTIVE_ATTEMPTS_SQL


def test_each_index_holds_only_the_attempts_its_reads_ask_for_and_back(
        empty_postgres_url: str) -> None:
    upgrade_database(empty_postgres_url)
    engine = make_engine(empty_postgres_url)
    try:
        _attempts(engine, count=300, finished=200)
        # 100 still dispatched; 200 finished
        assert _entries(engine) == {"ix_attempts_state_lease": 100, "ix_attempts_finished_at": 200}
        assert all(" WHERE " in d for d in _definitions(engine).values())
    finally:
        engine.dispose()
    downgrade_database(empty_postgres_url, BEFORE)
    engine = make_engine(empty_postgres_url)
    try:
        assert _entries(engine) == {"ix_attempts_state_lease": 300, "ix_attempts_finished_at": 300}
        assert not any(" WHERE " in d for d in _definitions(engine).values())
    finally:
        engine.dispose()
    upgrade_database(empty_postgres_url)


@pytest.mark.parametrize(("where", "index"), [
    ("state = 'dispatched' AND lease_expires_at < now()", "ix_attempts_state_lease"),  # leases
    ("state IN ('pending', 'dispatched', 'expired')", "ix_attempts_state_lease"),  # in flight
    ("state IN ('pending', 'expired')", "ix_attempts_state_lease"),  # claims from the start
    ("state IN ('pending', 'dispatched')", "ix_attempts_state_lease"),  # the API's queue view
    ("finished_at > now() - interval '60 seconds'", "ix_attempts_finished_at"),  # fleet view
])
def test_the_reads_of_unfinished_and_of_recently_finished_attempts_use_the_indexes(
        empty_postgres_url: str, where: str, index: str) -> None:
    upgrade_database(empty_postgres_url)
    engine = make_engine(empty_postgres_url)
    try:
        _attempts(engine, count=300, finished=200)
        with engine.connect() as conn:
            conn.execute(text("SET enable_seqscan = off"))
            plan = "\n".join(conn.execute(text(f"EXPLAIN SELECT id FROM attempts WHERE {where}"))
                             .scalars())
        assert index in plan, plan
    finally:
        engine.dispose()
