"""A batch's duplicate lookup reads the candidates with the batch's sources, whatever the
database, and on Postgres probes the source-hash index rather than reading every candidate."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, insert
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import repository
from kernelband.db.models import Candidate, Track
from kernelband.db.session import session_scope
from kernelband.loop.dedupe import _PREFETCHED, _same_source, prefetch_same_source

ROWS = 3_000  # enough candidates that reading them all costs more than a few probes


def _two_tracks(session: Session) -> tuple[int, int]:
    team = repository.get_or_create_team(session, "dedupe-team")
    problem = repository.get_or_create_problem(session, team.id, "p", "native", "S", {}, "h")
    ids = []
    for _ in range(2):
        job = repository.create_job(session, team.id, problem.id, ("cpu",))
        track = Track(job_id=job.id, target="cpu")
        session.add(track)
        session.flush()
        ids.append(track.id)
    return ids[0], ids[1]


def _candidate(session: Session, track_id: int, source: str, status: str = "measured") -> int:
    row = Candidate(track_id=track_id, editable=source, source_hash=source, status=status)
    session.add(row)
    session.flush()
    return row.id


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_prefetch_finds_each_track_and_source_pair_without_duplicates(
        database: str, request: pytest.FixtureRequest) -> None:
    factory: sessionmaker[Session] = request.getfixturevalue(f"{database}_factory")
    with session_scope(factory) as session:
        one, two = _two_tracks(session)
        first = _candidate(session, one, "a")
        _candidate(session, one, "a", status="duplicate")  # a duplicate is nobody's original
        later = _candidate(session, one, "a")
        other_track = _candidate(session, two, "a")
        _candidate(session, one, "b")  # a source no child has
        children = [Candidate(track_id=one, source_hash="a", editable="a"),
                    Candidate(track_id=two, source_hash="c", editable="c")]
        prefetch_same_source(session, children)
        found = {key: [c.id for c in rows] for key, rows in session.info[_PREFETCHED].items()}
    assert found == {(one, "a"): [first, later], (two, "c"): []}
    assert other_track not in found[(one, "a")]


def test_prefetch_on_postgres_probes_the_source_index(
        postgres_factory: sessionmaker[Session]) -> None:
    with session_scope(postgres_factory) as session:
        one, _ = _two_tracks(session)
        session.execute(insert(Candidate), [
            {"track_id": one, "editable": "x", "source_hash": f"{i:064x}", "status": "measured"}
            for i in range(ROWS)])
        wanted = {"tracks": [one], "hashes": [f"{i:064x}" for i in range(0, ROWS, 50)]}
        sent: list[tuple[str, Any]] = []
        engine = session.get_bind()

        def record(conn: Any, cursor: Any, statement: str, params: Any, *rest: Any) -> None:
            sent.append((statement, params))

        event.listen(engine, "before_cursor_execute", record)
        try:
            assert len(session.scalars(_same_source(session), wanted).all()) == ROWS // 50
        finally:
            event.remove(engine, "before_cursor_execute", record)
        cursor = session.connection().connection.cursor()
        cursor.execute(f"EXPLAIN {sent[-1][0]}", sent[-1][1])
        plan = "\n".join(line for line, in cursor.fetchall())
    # no statistics (no ANALYZE ran): an IN list of 60 hashes read every candidate before
    assert "Seq Scan on candidates" not in plan, plan
    assert "ix_candidates_source_hash" in plan, plan
