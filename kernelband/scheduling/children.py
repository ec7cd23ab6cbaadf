"""Generated children: the candidates successful generate results describe, inserted in bulk.

A batch of results inserts the children of all its generate results in one statement with
their ids returned (`json_rows.insert_returning_ids`), and each child joins the session as a
loaded row (`row_buffer.loaded_row`): the steps after read and change it as any other row,
without the unit of work building, sorting and inserting an object per child (which cost
several times the INSERT itself). A child is inserted once per attempt and transaction.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.orm import Session

from kernelband.db.json_rows import insert_returning_ids
from kernelband.db.models import Attempt, Candidate, Track, utcnow
from kernelband.db.row_buffer import loaded_row
from kernelband.generate.normalize import source_hash
from kernelband.scheduling.candidate_facts import note_child

_CHILDREN = "kb_generated_children"  # session.info: attempt id -> its child
Wanted = tuple[Track, Attempt, str, Candidate | None]  # track, attempt, editable, its parent


def attempt_candidate(session: Session, attempt: Attempt,
                      candidate: Candidate | None = None) -> Candidate:
    """The attempt's candidate (a generate attempt's parent): `candidate` when the caller read
    it with the attempt, else from the identity map (or the database)."""
    if candidate is not None and candidate.id == attempt.candidate_id:
        return candidate
    return session.get_one(Candidate, attempt.candidate_id)


def generated_child(session: Session, track: Track, attempt: Attempt, editable: str,
                    parent: Candidate | None = None) -> Candidate:
    """The child a successful generate result describes (its `editable`), inserted once per
    attempt (by `insert_children` for a whole batch, else here)."""
    prepared: dict[int, Candidate] = session.info.setdefault(_CHILDREN, {})
    if attempt.id not in prepared:
        insert_children(session, [(track, attempt, editable, parent)])
    return prepared[attempt.id]


def insert_children(session: Session, wanted: Sequence[Wanted]) -> list[Candidate]:
    """The children of these generate results, those not yet inserted in one INSERT; returns
    every one asked for, in order."""
    prepared: dict[int, Candidate] = session.info.setdefault(_CHILDREN, {})
    new: dict[int, dict[str, Any]] = {}
    parents: list[Candidate] = []
    for track, attempt, editable, parent in wanted:
        if attempt.id not in prepared and attempt.id not in new:
            parents.append(attempt_candidate(session, attempt, parent))
            new[attempt.id] = child_row(track, attempt, editable, parents[-1])
    rows = list(new.values())
    ids = insert_returning_ids(session.connection(), typing.cast(Table, Candidate.__table__),
                               rows)
    for attempt_id, row, child_id, parent in zip(new, rows, ids, parents, strict=True):
        prepared[attempt_id] = loaded_row(session, Candidate, {"id": child_id, **row})
        note_child(session, prepared[attempt_id], parent.editable)  # its compile's payload
    return [prepared[attempt.id] for _, attempt, _, _ in wanted]


def child_row(track: Track, attempt: Attempt, editable: str, parent: Candidate) -> dict[str, Any]:
    """Every column of the child's row but its id (a column left out would be read back)."""
    repair = attempt.payload.get("repair")
    return {"track_id": track.id, "parent_id": parent.id, "decision_id": attempt.decision_id,
            "strategy": attempt.payload.get("strategy"), "editable": editable,
            "status": "generated", "reason": None, "lineage_depth": parent.lineage_depth + 1,
            "source_hash": source_hash(editable), "duplicate_of": None,
            "repair_of": repair.get("failed_candidate") if isinstance(repair, dict) else None,
            "turn": int(attempt.payload.get("turn") or 0), "static_profile": None,
            "created_at": utcnow()}


__all__ = ["Wanted", "attempt_candidate", "child_row", "generated_child", "insert_children"]
