"""Migration 0013: candidates indexed by (source, track) instead of by source alone, up and down,
on Postgres and SQLite, with the rows already there."""

from __future__ import annotations

from sqlalchemy import inspect, text

from kernelband.db.session import downgrade_database, make_engine, upgrade_database
from tests.utils.db_rows import old_schema_track, scalar

BEFORE = "0012_attempts_finished_at_index"


def _indexes(url: str) -> dict[str, list[str | None]]:
    engine = make_engine(url)
    try:
        return {ix["name"] or "": ix["column_names"] for ix in inspect(engine).get_indexes("candidates")}
    finally:
        engine.dispose()


def test_the_source_index_becomes_a_source_and_track_index_and_back(empty_database_url: str) -> None:
    url = empty_database_url
    upgrade_database(url, BEFORE)
    engine = make_engine(url)
    with engine.begin() as conn:  # a candidate from before the migration
        old_schema_track(conn)
        conn.execute(text("INSERT INTO candidates (track_id, editable, status, lineage_depth, "
                          "source_hash, turn, created_at) VALUES (1, 'S', 'measured', 0, 'abc', "
                          "0, CURRENT_TIMESTAMP)"))
    engine.dispose()
    assert _indexes(url)["ix_candidates_source_hash"] == ["source_hash"]
    upgrade_database(url)
    indexes = _indexes(url)
    assert indexes["ix_candidates_source_hash_track"] == ["source_hash", "track_id"]
    assert "ix_candidates_source_hash" not in indexes
    downgrade_database(url, BEFORE)
    indexes = _indexes(url)
    assert indexes["ix_candidates_source_hash"] == ["source_hash"]
    assert "ix_candidates_source_hash_track" not in indexes
    upgrade_database(url)
    assert scalar(url, "SELECT count(*) FROM candidates") == 1
