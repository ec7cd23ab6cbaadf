"""Payloads built from the candidate facts an engine context holds equal those built from a
read, and only committed facts are held."""

from __future__ import annotations

from typing import Any

import pytest
from scheduling_fakes import context, make_job, run_to_end
from sqlalchemy.orm import Session, sessionmaker

from kernelband.scheduling import candidate_facts, payloads, pipeline
from kernelband.scheduling.candidate_facts import (
    CandidateFacts,
    known_facts,
    note_facts,
    note_static_profile,
)
from kernelband.scheduling.pipeline import fenced


def _read_afresh(session: Session, attempts: Any) -> list[dict[str, Any]]:
    """The payloads as a context holding nothing builds them (every candidate read)."""
    kept = {key: session.info.pop(key) for key in ("kb_held_candidates", "kb_noted_candidates")
            if key in session.info}
    try:
        return payloads.task_payloads(session, attempts)
    finally:
        session.info.update(kept)


def test_held_facts_give_the_payloads_a_read_gives(db_factory: sessionmaker[Session],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    built = payloads.task_payloads
    compared: list[str] = []

    def both(session: Session, attempts: Any, facts: Any = None) -> list[dict[str, Any]]:
        held = built(session, attempts, facts)
        assert held == _read_afresh(session, attempts)
        compared.extend(attempt.kind for attempt in attempts)
        return held

    monkeypatch.setattr(pipeline, "task_payloads", both)
    job_id = make_job(db_factory, targets=("h100",), budget_iterations=6, parallelism=2)
    ctx = context(db_factory)
    run_to_end(ctx, job_id)
    assert {"generate", "compile", "profile", "verify"} <= set(compared)
    assert ctx.payload_facts.candidates.facts  # the children noted as they were written


def test_a_rolled_back_transaction_holds_nothing_it_noted(
        db_factory: sessionmaker[Session]) -> None:
    ctx = context(db_factory)
    facts = CandidateFacts(7, "K", None, None, None)
    with pytest.raises(RuntimeError), fenced(ctx) as session:
        note_facts(session, facts)
        assert known_facts(session, {7}) == {7: facts}  # seen by its own transaction
        raise RuntimeError("rolled back")
    assert ctx.payload_facts.candidates.facts == {}
    with fenced(ctx) as session:
        note_facts(session, facts)
    assert ctx.payload_facts.candidates.facts == {7: facts}


def test_a_savepoint_rolled_back_forgets_what_was_noted(db_factory: sessionmaker[Session]) -> None:
    ctx = context(db_factory)
    with fenced(ctx) as session:
        note_facts(session, CandidateFacts(7, "K", None, None, None))
    with fenced(ctx) as session:
        note_static_profile(session, 7, {"features": {"phi": [1.0]}})
        session.begin_nested().rollback()  # the change may or may not be committed
    assert 7 not in ctx.payload_facts.candidates.facts  # read again when asked for


def test_the_least_recently_noted_go_first_past_the_bound(db_factory: sessionmaker[Session],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(candidate_facts, "MAX_HELD", 2)
    ctx = context(db_factory)
    for candidate_id in (1, 2, 1, 3):  # 1 noted again after 2
        with fenced(ctx) as session:
            note_facts(session, CandidateFacts(candidate_id, "K", None, None, None))
    assert list(ctx.payload_facts.candidates.facts) == [1, 3]
