"""Paired speedup columns: migration 0009 up and down on Postgres, and rows as ingestion writes them."""

from __future__ import annotations

from sqlalchemy import inspect, select, text
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.json_rows import insert_rows
from kernelband.db.models import Candidate, Measurement, utcnow
from kernelband.db.session import (
    downgrade_database,
    make_engine,
    session_scope,
    upgrade_database,
)
from kernelband.profile.paired import PairedSpeedup
from kernelband.speedups import of_measurement, paired_columns
from tests.utils.db_rows import new_track, old_schema_track

MEASUREMENT_COLUMNS = {"speedup", "speedup_low", "speedup_high", "speedup_rounds",
                       "speedup_method", "speedup_baseline"}
TRACK_COLUMNS = {"best_speedup_low", "best_speedup_high", "best_speedup_method",
                 "best_speedup_final"}


def _columns(url: str, table: str) -> set[str]:
    engine = make_engine(url)
    try:
        return {c["name"] for c in inspect(engine).get_columns(table)}
    finally:
        engine.dispose()


def test_migration_adds_and_removes_the_columns_on_postgres(empty_postgres_url: str) -> None:
    upgrade_database(empty_postgres_url, "0008_job_limits")
    engine = make_engine(empty_postgres_url)
    with engine.begin() as conn:  # a track from before paired speedups
        old_schema_track(conn, "completed", "h200", iterations_dispatched=2, iterations_done=2, best_speedup=5.0,
                         best_label="measured")
    upgrade_database(empty_postgres_url, "0009_paired_speedups")
    assert _columns(empty_postgres_url, "measurements") >= MEASUREMENT_COLUMNS
    assert _columns(empty_postgres_url, "tracks") >= TRACK_COLUMNS
    with engine.connect() as conn:
        old = conn.execute(text("SELECT best_speedup_final, best_speedup_low FROM tracks")).one()
    assert tuple(old) == (False, None)  # an old best: no interval, so it shows "not measured"
    downgrade_database(empty_postgres_url, "0008_job_limits")
    assert not MEASUREMENT_COLUMNS & _columns(empty_postgres_url, "measurements")
    assert not TRACK_COLUMNS & _columns(empty_postgres_url, "tracks")
    upgrade_database(empty_postgres_url)
    assert _columns(empty_postgres_url, "measurements") >= MEASUREMENT_COLUMNS
    engine.dispose()


def test_buffered_measurement_rows_keep_the_paired_speedup(
        db_factory: sessionmaker[Session]) -> None:
    track_id = new_track(db_factory, "paired-team")
    with session_scope(db_factory) as session:
        candidate = Candidate(track_id=track_id, editable="X", status="measured")
        session.add(candidate)
        session.flush()
        candidate_id = candidate.id
    paired = PairedSpeedup(1.18, 1.12, 1.24, 30, "ABBA rounds; 95% BCa bootstrap", "original")
    row = {"candidate_id": candidate_id, "label": "measured", "method": "paired A/B",
           "device": "NVIDIA H200", "target": "h200", "time_ms": 0.85, "case_times": [],
           "cv": None, "noisy": False, "paired_ratio": None, "features": None,
           "created_at": utcnow(), **paired_columns(paired.to_dict())}
    with session_scope(db_factory) as session:  # the path ingestion's row buffer takes
        insert_rows(session.connection(), Measurement.__table__, [row])
    with session_scope(db_factory) as session:
        stored = session.scalars(select(Measurement)).one()
        assert (stored.speedup, stored.speedup_low, stored.speedup_high) == (1.18, 1.12, 1.24)
        assert stored.speedup_rounds == 30 and stored.speedup_baseline == "original"
        assert of_measurement(stored, 1.0).text() == paired.describe() == "1.18x [1.12, 1.24]"
