"""Migration 0014: the tracks table's storage parameters (Postgres), up and down on Postgres and
SQLite, with a track row already there."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from kernelband.db.session import downgrade_database, make_engine, upgrade_database

BEFORE = "0013_source_track_index"


def _scalar(url: str, sql: str) -> object:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text(sql)).scalar_one()
    finally:
        engine.dispose()


def _options(url: str) -> list[str] | None:
    value = _scalar(url, "SELECT reloptions FROM pg_class WHERE relname = 'tracks'")
    return None if value is None else sorted(str(option) for option in value)  # type: ignore[attr-defined]


def _a_track(url: str) -> None:
    engine = make_engine(url)
    with engine.begin() as conn:
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
                          "iterations_done, version, policy_state) VALUES (1, 'cpu', 'running', "
                          "0, 0, 1, '{\"t\": 3}')"))
    engine.dispose()


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_tracks_get_half_full_pages_and_out_of_row_states_and_lose_them_going_down(
        database: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url = (request.getfixturevalue("empty_postgres_url") if database == "postgres"
           else f"sqlite:///{tmp_path / 'kb.sqlite'}")
    postgres = database == "postgres"
    upgrade_database(url, BEFORE)
    _a_track(url)
    if postgres:
        assert _options(url) is None
    upgrade_database(url)
    if postgres:
        assert _options(url) == ["fillfactor=50", "toast_tuple_target=128"]
    downgrade_database(url, BEFORE)
    if postgres:
        assert _options(url) is None
    upgrade_database(url)
    assert _scalar(url, "SELECT count(*) FROM tracks") == 1
    assert "3" in str(_scalar(url, "SELECT policy_state FROM tracks"))
