"""A batch's duplicate lookup reads the candidates with the batch's sources, whatever the
database, and on Postgres probes the (source, track) index rather than reading every candidate,
or every track's candidates with a source."""

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


def _tracks(session: Session, count: int) -> list[int]:
    team = repository.get_or_create_team(session, "dedupe-team")
    problem = repository.get_or_create_problem(session, team.id, "p", "native", "S", {}, "h")
    ids = []
    for _ in range(count):
        job = repository.create_job(session, team.id, problem.id, ("cpu",))
        track = Track(job_id=job.id, target="cpu")
        session.add(track)
        session.flush()
        ids.append(track.id)
    return ids


def _two_tracks(session: Session) -> tuple[int, int]:
    one, two = _tracks(session, 2)
    return one, two


def _plan(session: Session, wanted: dict[str, list[Any]], analyze: bool = False) -> Any:
    """The plan Postgres makes (and with `analyze` runs) for the lookup of `wanted`."""
    sent: list[tuple[str, Any]] = []
    engine = session.get_bind()

    def record(conn: Any, cursor: Any, statement: str, params: Any, *rest: Any) -> None:
        sent.append((statement, params))

    event.listen(engine, "before_cursor_execute", record)
    try:
        found = session.scalars(_same_source(session), wanted).all()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    cursor = session.connection().connection.cursor()
    options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT TEXT"
    cursor.execute(f"EXPLAIN ({options}) {sent[-1][0]}", sent[-1][1])
    rows = cursor.fetchall()
    return found, rows[0][0] if analyze else "\n".join(line for line, in rows)


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(node for child in plan.get("Plans", []) for node in _nodes(child))]


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
        hashes = [f"{i:064x}" for i in range(0, ROWS, 50)]
        found, plan = _plan(session, {"tracks": [one] * len(hashes), "hashes": hashes})
    assert len(found) == ROWS // 50
    # no statistics (no ANALYZE ran): an IN list of 60 hashes read every candidate before
    assert "Seq Scan on candidates" not in plan, plan
    assert "ix_candidates_source_hash_track" in plan, plan


def test_prefetch_on_postgres_reads_only_the_asked_tracks_rows_of_a_shared_source(
        postgres_factory: sessionmaker[Session]) -> None:
    with session_scope(postgres_factory) as session:
        tracks = _tracks(session, 40)
        hashes = [f"{i:064x}" for i in range(60)]
        session.execute(insert(Candidate), [  # every track has every source
            {"track_id": track, "editable": "x", "source_hash": h, "status": "measured"}
            for track in tracks for h in hashes])
        found, plan = _plan(session, {"tracks": [tracks[7]] * 60, "hashes": hashes},
                            analyze=True)
    assert sorted(c.source_hash for c in found) == hashes
    assert {c.track_id for c in found} == {tracks[7]}
    nodes = _nodes(plan[0]["Plan"])
    probes = [n for n in nodes if n.get("Index Name") == "ix_candidates_source_hash_track"]
    assert probes and all(n["Actual Rows"] <= 1 for n in probes), plan
    # by source alone each probe read the 40 tracks' rows and dropped 39 of them
    assert not any(n.get("Rows Removed by Filter") for n in nodes), plan
