"""Migration 0013: candidates indexed by (source, track) instead of by source alone, up and down,
on Postgres and SQLite, with the rows already there."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from kernelband.db.session import downgrade_database, make_engine, upgrade_database

BEFORE = "0012_attempts_finished_at_index"


def _indexes(url: str) -> dict[str, list[str | None]]:
    engine = make_engine(url)
    try:
        return {ix["name"] or "": ix["column_names"] for ix in inspect(engine).get_indexes("candidates")}
    finally:
        engine.dispose()


def _candidate_count(url: str) -> int:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM candidates")).scalar_one())
    finally:
        engine.dispose()


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_the_source_index_becomes_a_source_and_track_index_and_back(
        database: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url = (request.getfixturevalue("empty_postgres_url") if database == "postgres"
           else f"sqlite:///{tmp_path / 'kb.sqlite'}")
    upgrade_database(url, BEFORE)
    engine = make_engine(url)
    with engine.begin() as conn:  # a candidate from before the migration
        conn.execute(text("INSERT INTO teams (name, skill_library, created_at) "
                          "VALUES ('t', true, CURRENT_TIMESTAMP)"))
        conn.execute(text("INSERT INTO problems (team_id, name, format, content_hash, source, "
                          "loaded, created_at) VALUES (1, 'p', 'native', 'h', 's', '{}', "
                          "CURRENT_TIMESTAMP)"))
        conn.execute(text("INSERT INTO jobs (team_id, problem_id, status, targets, policy, "
                          "policy_params, generator, model, seed, budget_iterations, parallelism, "
                          "cancel_requested, tokens_used, cost_usd, cost_known, created_at) VALUES "
                          "(1, 1, 'running', '[\"cpu\"]', 'kernelband', '{}', 'rules', '', 0, "
                          "2, 1, false, 0, 0, true, CURRENT_TIMESTAMP)"))
        conn.execute(text("INSERT INTO tracks (job_id, target, status, iterations_dispatched, "
                          "iterations_done, version) VALUES (1, 'cpu', 'running', 0, 0, 1)"))
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
    assert _candidate_count(url) == 1
