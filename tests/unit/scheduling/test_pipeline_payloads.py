"""What the engine's tasks carry: hardware-signature requests, sandbox limits, the child's and
its parent's code, and the typed result each ingest step receives (fake tasks, no GPU)."""

from __future__ import annotations

from typing import Any

import pytest
from scheduling_fakes import STATIC_FEATURES, context, make_job, run_to_end
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.models import Candidate
from kernelband.db.session import session_scope
from kernelband.scheduling import ingest
from kernelband.scheduling.results import CompileResult, GenerateResult, ProfileResult, VerifyResult


@pytest.mark.parametrize(("policy", "signature"), [("kernelband", True), ("ucb1", False)])
def test_profile_tasks_ask_for_a_hardware_signature_only_when_the_policy_reads_it(
    db_factory: sessionmaker[Session], policy: str, signature: bool,
) -> None:
    job_id = make_job(db_factory, targets=("h100",), budget_iterations=2, policy=policy)
    ctx = context(db_factory)
    run_to_end(ctx, job_id)
    profiles = [m for m in ctx.dispatcher.submitted if m.kind == "profile"]  # type: ignore[attr-defined]
    assert len(profiles) >= 2  # the original and at least one child
    assert {m.payload["hardware_signature"] for m in profiles} == {signature}


def test_every_task_of_a_job_carries_its_sandbox_limits(db_factory: sessionmaker[Session]) -> None:
    limits = {"compile_s": 900.0, "run_s": 30.0}
    job_id = make_job(db_factory, targets=("h100",), budget_iterations=2, limits=limits)
    plain_id = make_job(db_factory, targets=("h100",), budget_iterations=2)
    ctx = context(db_factory)
    run_to_end(ctx, job_id)
    run_to_end(ctx, plain_id)
    sent = ctx.dispatcher.submitted  # type: ignore[attr-defined]
    mine = [m for m in sent if m.payload["job_id"] == job_id]
    assert {m.kind for m in mine} >= {"generate", "compile", "profile"}
    assert all(m.payload["limits"] == limits for m in mine)
    assert all("limits" not in m.payload for m in sent if m.payload["job_id"] == plain_id)


def test_compile_and_profile_payloads_carry_the_child_and_its_parents_code(
        db_factory: sessionmaker[Session]) -> None:
    job_id = make_job(db_factory, targets=("h100",), budget_iterations=2)
    ctx = context(db_factory)
    run_to_end(ctx, job_id)
    with session_scope(db_factory) as session:
        code = {c.id: (c.editable, c.parent_id) for c in session.scalars(select(Candidate))}
    sent = ctx.dispatcher.submitted  # type: ignore[attr-defined]
    children = [m for m in sent if m.kind in ("compile", "profile") and m.payload.get("editable")
                and m.payload["editable"] != "ORIGINAL"]
    assert {m.kind for m in children} == {"compile", "profile"}
    by_code = {editable: parent for editable, parent in code.values()}
    for message in children:
        parent_code = code[by_code[message.payload["editable"]]][0]
        if message.kind == "profile":
            assert message.payload["parent_editable"] == parent_code
            # the compile step's phi and h travel on: a GPU node need not profile them again
            assert message.payload["static_features"] == STATIC_FEATURES
        else:
            assert "parent_editable" not in message.payload
    originals = [m for m in sent if m.kind == "profile" and m.payload.get("editable") == "ORIGINAL"]
    assert originals and all("static_features" not in m.payload for m in originals)


def test_every_ingest_step_receives_its_kinds_typed_result(
    db_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, set[type]] = {}
    for name in ("apply_generate", "apply_compile", "apply_profile", "apply_baseline",
                 "apply_verify"):
        original = getattr(ingest, name)

        def spy(*args: Any, _name: str = name, _original: Any = original, **rows: Any) -> None:
            seen.setdefault(_name, set()).add(type(args[-1]))  # rows: the candidate read with it
            _original(*args, **rows)

        monkeypatch.setattr(ingest, name, spy)
    job_id = make_job(db_factory, budget_iterations=6, parallelism=2)
    run_to_end(context(db_factory), job_id)  # the fakes answer with plain JSON dicts
    assert seen == {"apply_generate": {GenerateResult}, "apply_compile": {CompileResult},
                    "apply_baseline": {ProfileResult}, "apply_profile": {ProfileResult},
                    "apply_verify": {VerifyResult}}
