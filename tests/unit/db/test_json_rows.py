"""insert_rows: one JSON parameter on Postgres, an executemany elsewhere, the same rows stored."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.json_rows import insert_returning_ids, insert_rows, portable, rows_portable
from kernelband.db.models import Candidate, Measurement
from kernelband.db.session import session_scope
from tests.utils.db_rows import new_track
from tests.utils.sql_log import sent_statements

WHEN = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


def _candidate(factory: sessionmaker[Session]) -> int:
    track_id = new_track(factory, "rows-team")
    with session_scope(factory) as session:
        candidate = Candidate(track_id=track_id, editable="X", status="measured")
        session.add(candidate)
        session.flush()
        return candidate.id


def _measurement(candidate_id: int, time_ms: float, features: dict | None) -> dict[str, object]:
    return {"candidate_id": candidate_id, "label": "measured", "method": "probe",
            "device": "cpu", "target": "cpu", "time_ms": time_ms, "case_times": [["a", 1.5]],
            "cv": None, "noisy": False, "paired_ratio": 0.25, "features": features,
            "created_at": WHEN}


def test_rows_are_stored_with_their_column_types(db_factory: sessionmaker[Session]) -> None:
    candidate_id = _candidate(db_factory)
    rows = [_measurement(candidate_id, 0.5, {"phi": [1.0, 2.0], "h": None}),
            _measurement(candidate_id, 0.75, None)]
    with sent_statements(db_factory.kw["bind"]) as sent, session_scope(db_factory) as session:
        insert_rows(session.connection(), Measurement.__table__, rows)
    inserts = [s for s in sent if s.startswith("INSERT")]
    assert len(inserts) == 1
    if db_factory.kw["bind"].dialect.name == "postgresql":
        assert "json_populate_recordset" in inserts[0]
    with session_scope(db_factory) as session:
        stored = session.scalars(select(Measurement).order_by(Measurement.id)).all()
        nulls = session.execute(text("SELECT count(*) FROM measurements "
                                     "WHERE features IS NULL")).scalar()
    assert [m.time_ms for m in stored] == [0.5, 0.75]
    assert [m.features for m in stored] == [{"phi": [1.0, 2.0], "h": None}, None]
    assert nulls == 1  # None in a JSON column is SQL NULL, not the JSON value null
    assert stored[0].case_times == [["a", 1.5]] and stored[0].paired_ratio == 0.25
    assert stored[0].cv is None and stored[0].noisy is False
    assert stored[0].created_at.replace(tzinfo=UTC) == WHEN


def test_a_non_finite_float_takes_the_executemany(db_factory: sessionmaker[Session]) -> None:
    candidate_id = _candidate(db_factory)
    assert not portable([1.0, math.inf]) and portable([1.0, "x", None, 3])
    with sent_statements(db_factory.kw["bind"]) as sent, session_scope(db_factory) as session:
        insert_rows(session.connection(), Measurement.__table__,
                    [_measurement(candidate_id, math.inf, None)])
    assert not any("json_populate_recordset" in s for s in sent)
    with session_scope(db_factory) as session:
        assert session.scalars(select(Measurement.time_ms)).one() == math.inf


def test_inserted_ids_come_back_in_the_rows_order(db_factory: sessionmaker[Session]) -> None:
    candidate_id = _candidate(db_factory)
    times = [0.9, 0.1, 0.5, 0.3, math.inf]  # the last row: not portable, the executemany path
    for rows in ([_measurement(candidate_id, t, {"n": t}) for t in times[:4]],
                 [_measurement(candidate_id, t, None) for t in times]):
        with (sent_statements(db_factory.kw["bind"], "INSERT") as sent,
              session_scope(db_factory) as session):
            ids = insert_returning_ids(session.connection(), Measurement.__table__, rows)
        assert len(ids) == len(rows) == len(set(ids))
        assert len(sent) == 1 or db_factory.kw["bind"].dialect.name != "postgresql"
        with session_scope(db_factory) as session:
            stored = {i: t for i, t in session.execute(select(Measurement.id, Measurement.time_ms)
                                                       .where(Measurement.id.in_(ids)))}
        assert [stored[i] for i in ids] == [row["time_ms"] for row in rows]
    with session_scope(db_factory) as session:
        assert insert_returning_ids(session.connection(), Measurement.__table__, []) == []
        nulls = session.execute(text("SELECT count(*) FROM measurements "
                                     "WHERE features IS NULL")).scalar()
    assert nulls == len(times)  # None in a JSON column is SQL NULL on either path


def test_rows_are_portable_only_without_a_nan_or_infinity() -> None:
    assert rows_portable([(1.0, "x", None), (2, 3.5, True)]) and rows_portable([])
    assert not rows_portable([(1.0,), ("x", math.nan)])
    assert not rows_portable([(math.inf,), (-math.inf,)])  # their sum is NaN: still refused
    assert not portable([np.float64("nan")]) and portable([np.float64(2.5), 7])
    # finite values whose sum overflows take the slower path: never a wrong one
    assert not portable([1e308, 1e308])
