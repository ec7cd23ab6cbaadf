"""Migration 0014: the tracks table's storage parameters (Postgres), up and down on Postgres and
SQLite, with a track row already there."""

from __future__ import annotations

from kernelband.db.session import downgrade_database, make_engine, upgrade_database
from tests.utils.db_rows import old_schema_track, scalar

BEFORE = "0013_source_track_index"


def _options(url: str) -> list[str] | None:
    value = scalar(url, "SELECT reloptions FROM pg_class WHERE relname = 'tracks'")
    return None if value is None else sorted(str(option) for option in value)  # type: ignore[attr-defined]


def _a_track(url: str) -> None:
    engine = make_engine(url)
    with engine.begin() as conn:
        old_schema_track(conn, policy_state='{"t": 3}')
    engine.dispose()


def test_tracks_get_half_full_pages_and_out_of_row_states_and_lose_them_going_down(empty_database_url: str) -> None:
    url = empty_database_url
    postgres = url.startswith("postgresql")
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
    assert scalar(url, "SELECT count(*) FROM tracks") == 1
    assert "3" in str(scalar(url, "SELECT policy_state FROM tracks"))
