"""Changed rows of a flush: one UPDATE per table and column set on Postgres (versioned for
tracks), stale versions refused."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from scheduling_fakes import make_job
from sqlalchemy import select, text, update
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.json_rows import records_param
from kernelband.db.models import Attempt, Track
from kernelband.db.session import ConflictError, session_scope
from kernelband.scheduling.lifecycle import start_queued_jobs
from kernelband.scheduling.row_updates import _recordset_update, batch_row_updates
from tests.utils.sql_log import sent_statements


def three_tracks(factory: sessionmaker[Session]) -> list[int]:
    make_job(factory, targets=("cpu", "h100", "a100"))
    with session_scope(factory) as session:
        start_queued_jobs(session)
        return list(session.scalars(select(Track.id).order_by(Track.id)))


def versions(factory: sessionmaker[Session]) -> dict[int, tuple[int, int, str | None]]:
    with session_scope(factory) as session:
        rows = session.execute(select(Track.id, Track.version, Track.iterations_done,
                                      Track.reason)).all()
        return {row[0]: (row[1], row[2], row[3]) for row in rows}


def test_changed_tracks_of_a_flush_go_out_in_one_versioned_update(
        postgres_factory: sessionmaker[Session]) -> None:
    ids = three_tracks(postgres_factory)
    before = versions(postgres_factory)
    engine = postgres_factory.kw["bind"]
    with sent_statements(engine, "UPDATE") as updates, session_scope(postgres_factory) as session:
        batch_row_updates(session)
        for track in session.scalars(select(Track)):
            track.iterations_done += 2
            if track.id == ids[0]:
                track.reason = "a different set of columns"
    after = versions(postgres_factory)
    assert len(updates) == 2  # one per set of changed columns, not one per track
    for track_id in ids:
        assert after[track_id][0] == before[track_id][0] + 1
        assert after[track_id][1] == before[track_id][1] + 2
    assert after[ids[0]][2] == "a different set of columns"
    with session_scope(postgres_factory) as session:  # the ORM continues from the new version
        session.get_one(Track, ids[1]).iterations_done += 1
    assert versions(postgres_factory)[ids[1]][0] == before[ids[1]][0] + 2


def test_a_track_changed_by_another_writer_rolls_the_transaction_back(
        postgres_factory: sessionmaker[Session]) -> None:
    ids = three_tracks(postgres_factory)
    with pytest.raises(ConflictError, match="another writer"), session_scope(postgres_factory) as session:
        batch_row_updates(session)
        tracks = list(session.scalars(select(Track)))
        with postgres_factory() as other, other.begin():  # another writer commits first
            other.execute(update(Track).where(Track.id == ids[2])
                          .values(version=Track.version + 1, reason="other writer"))
        for track in tracks:
            track.iterations_done += 5
    after = versions(postgres_factory)
    assert [after[i][1] for i in ids] == [0, 0, 0]  # nothing of the stale transaction stayed
    assert after[ids[2]][2] == "other writer"


def test_json_state_floats_and_timestamps_are_stored_as_the_orm_would(
        postgres_factory: sessionmaker[Session]) -> None:
    """Rows travel as one JSON parameter (timestamps included); rows with a non-finite float
    take a VALUES list; a column set changed on one row only is left to the ORM."""
    ids = three_tracks(postgres_factory)
    before = versions(postgres_factory)
    finished = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    state = {"labels": "0120", "arm_mu": [[0.5, 1e-05]], "nested": {"ok": True}}
    engine = postgres_factory.kw["bind"]
    with sent_statements(engine, "UPDATE") as first, session_scope(postgres_factory) as session:
        batch_row_updates(session)
        tracks = list(session.scalars(select(Track).order_by(Track.id)))
        for track in tracks:
            track.policy_state, track.best_time_ms = state, 0.125
        tracks[0].finished_at = tracks[1].finished_at = finished
    assert len(first) == 2 and "json_populate_recordset" in first[0]  # tracks 0 and 1
    assert "json_populate_recordset" not in first[1]  # track 2 alone: the ORM's UPDATE
    with sent_statements(engine, "UPDATE") as second, session_scope(postgres_factory) as session:
        batch_row_updates(session)
        for track in session.scalars(select(Track).where(Track.id.in_(ids[:2]))):
            track.best_speedup = math.inf
    assert len(second) == 1 and "VALUES" in second[0]
    with session_scope(postgres_factory) as session:
        rows = session.execute(select(Track.id, Track.policy_state, Track.best_time_ms,
                                      Track.finished_at, Track.best_speedup, Track.version)
                               .order_by(Track.id)).all()
    assert [row.policy_state for row in rows] == [state] * 3
    assert [row.best_time_ms for row in rows] == [0.125] * 3
    assert [row.finished_at for row in rows] == [finished, finished, None]
    assert [row.best_speedup for row in rows] == [math.inf, math.inf, None]
    # every write bumped the version once: two for tracks 0 and 1, one for track 2
    assert [row.version - before[row.id][0] for row in rows] == [2, 2, 1]
    assert [r.id for r in rows] == ids


def test_closed_attempts_of_a_flush_go_out_in_one_update(
        postgres_factory: sessionmaker[Session]) -> None:
    """Attempts and candidates, unversioned, are batched alike."""
    three_tracks(postgres_factory)
    when = datetime(2026, 5, 6, 7, 8, 9, tzinfo=UTC)
    engine = postgres_factory.kw["bind"]
    with sent_statements(engine, "UPDATE") as sent, session_scope(postgres_factory) as session:
        batch_row_updates(session)
        attempts = list(session.scalars(select(Attempt).order_by(Attempt.id)))
        for n, attempt in enumerate(attempts):
            attempt.state, attempt.finished_at = "done", when
            attempt.result = {"ok": True, "n": n, "none": None}
    assert len(sent) == 1 and "UPDATE attempts" in sent[0]
    with session_scope(postgres_factory) as session:
        stored = session.execute(select(Attempt.state, Attempt.finished_at, Attempt.result)
                                 .order_by(Attempt.id)).all()
    assert [tuple(row) for row in stored] == [
        ("done", when, {"ok": True, "n": n, "none": None}) for n in range(len(attempts))]


def test_a_batched_update_finds_its_rows_by_primary_key_in_a_table_never_analyzed(
        postgres_factory: sessionmaker[Session]) -> None:
    """The planner cannot tell how many records the JSON parameter holds (it assumes 100): a
    join on it alone scanned the whole table, dead versions included, to write two rows."""
    three_tracks(postgres_factory)
    columns = "job_id, track_id, kind, state, queue, tries, payload, created_at"
    with session_scope(postgres_factory) as session:  # copies of the baselines, written twice
        session.execute(text(f"INSERT INTO attempts ({columns}) SELECT {columns} "
                             "FROM attempts, generate_series(1, 700)"))
        session.execute(text("UPDATE attempts SET state = 'dispatched'"))
        ids = list(session.scalars(select(Attempt.id).order_by(Attempt.id.desc()).limit(2)))
    statement = _recordset_update("attempts", ("state",), False)
    rows = records_param([{"id": attempt_id, "state": "done"} for attempt_id in ids])
    with session_scope(postgres_factory) as session:
        plan = "\n".join(session.scalars(text(f"EXPLAIN {statement.text}"), {**rows, "ids": ids}))
        session.rollback()
    assert "pk_attempts" in plan and "Seq Scan on attempts" not in plan, plan
