"""upsert_rows: one statement inserts new rows and updates only rows whose values changed."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.models import Cluster
from kernelband.db.session import session_scope
from kernelband.db.upsert import upsert_rows
from tests.utils.db_rows import new_track

KEYS, COMPARED = ("track_id", "cluster"), ("members", "size", "representative_id", "centroid")


def _row(track_id: int, cluster: int, members: list[str], when: datetime) -> dict[str, object]:
    return {"track_id": track_id, "cluster": cluster, "members": members, "size": len(members),
            "representative_id": int(members[0]) if members else None, "centroid": [0.5, 1.0],
            "updated_at": when}


def _stored(factory: sessionmaker[Session], track_id: int) -> dict[int, tuple[list, datetime]]:
    with session_scope(factory) as session:
        rows = session.scalars(select(Cluster).where(Cluster.track_id == track_id))
        return {r.cluster: (list(r.members), r.updated_at.replace(tzinfo=UTC)) for r in rows}


def test_upsert_inserts_then_touches_only_changed_rows(db_factory: sessionmaker[Session]) -> None:
    track_id = new_track(db_factory, "upsert-team")
    first = datetime(2026, 1, 1, tzinfo=UTC)
    with session_scope(db_factory) as session:
        upsert_rows(session, Cluster, [_row(track_id, 0, ["1", "2"], first),
                                       _row(track_id, 1, [], first)],
                    KEYS, COMPARED, touched="updated_at")
    assert _stored(db_factory, track_id) == {0: (["1", "2"], first), 1: ([], first)}

    later = first + timedelta(hours=1)
    with session_scope(db_factory) as session:
        upsert_rows(session, Cluster, [_row(track_id, 0, ["1", "2"], later),  # same values
                                       _row(track_id, 1, ["3"], later),  # JSON list changed
                                       _row(track_id, 2, ["4"], later)],  # new
                    KEYS, COMPARED, touched="updated_at")
        upsert_rows(session, Cluster, [], KEYS, COMPARED)  # nothing to send
    assert _stored(db_factory, track_id) == {0: (["1", "2"], first), 1: (["3"], later),
                                             2: (["4"], later)}


def test_carried_columns_change_only_with_a_compared_one(
        db_factory: sessionmaker[Session]) -> None:
    track_id = new_track(db_factory, "upsert-carried-team")
    first = datetime(2026, 1, 1, tzinfo=UTC)

    def write(centroid: list[float], members: list[str], when: datetime) -> None:
        row = {**_row(track_id, 0, members, when), "centroid": centroid}
        with session_scope(db_factory) as session:
            upsert_rows(session, Cluster, [row], KEYS, ("members", "size"),
                        touched="updated_at", carried=("centroid",))

    def centroid() -> list[float]:
        with session_scope(db_factory) as session:
            return list(session.scalars(select(Cluster.centroid)
                                        .where(Cluster.track_id == track_id)).one())

    write([0.0], ["1"], first)
    write([9.0], ["1"], first + timedelta(hours=1))  # only the carried value differs
    assert centroid() == [0.0] and _stored(db_factory, track_id)[0][1] == first
    write([9.0], ["1", "2"], first + timedelta(hours=2))  # a compared change carries it along
    assert centroid() == [9.0]


def test_rows_of_one_key_count_once_and_non_finite_values_are_stored(
        db_factory: sessionmaker[Session]) -> None:
    track_id = new_track(db_factory, "upsert-duplicate-team")
    when = datetime(2026, 1, 1, tzinfo=UTC)
    with session_scope(db_factory) as session:  # the same key twice in one call: the last wins
        upsert_rows(session, Cluster, [_row(track_id, 0, ["1"], when),
                                       _row(track_id, 0, ["1", "2"], when)],
                    KEYS, COMPARED, touched="updated_at")
    assert _stored(db_factory, track_id)[0][0] == ["1", "2"]
    rows = [{**_row(track_id, c, ["3"], when), "centroid": [math.inf, 0.0]} for c in (0, 1)]
    with session_scope(db_factory) as session:  # JSON has no infinity: the other path takes it
        upsert_rows(session, Cluster, rows, KEYS, COMPARED, touched="updated_at")
    assert {c: members for c, (members, _) in _stored(db_factory, track_id).items()} == {
        0: ["3"], 1: ["3"]}
