"""Repair turns over real HTTP: a failed child is repaired inside its pull, the bandit counts
the pull once, budgets and the turn limit stop repairs, held-out cases never reach the model."""

from __future__ import annotations

from pathlib import Path

import pytest
from loop_kit import (
    HELD_OUT_NAMES,
    events,
    make_llm_job,
    region,
    reply,
    run_job,
    scripted_llm,
    write_script,
)
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import repository
from kernelband.db.models import Attempt, Candidate, Job, LlmUsage, Transcript
from kernelband.db.session import session_scope
from kernelband.problem.model import KernelProblem
from kernelband.scheduling.state import load_state


def _generate_attempts(session: Session, job_id: int) -> list[Attempt]:
    query = select(Attempt).where(Attempt.job_id == job_id, Attempt.kind == "generate")
    return list(session.scalars(query.order_by(Attempt.id)))


def _children(session: Session, job_id: int) -> list[Candidate]:
    track = repository.job_tracks(session, job_id)[0]
    query = select(Candidate).where(Candidate.track_id == track.id,
                                    Candidate.id != track.original_candidate_id)
    return list(session.scalars(query.order_by(Candidate.id)))


def test_compile_error_then_fix_is_repaired_within_one_pull(
        db_factory: sessionmaker[Session], problem: KernelProblem, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    sqlite_factory = db_factory  # the same test on SQLite and Postgres
    root = write_script(tmp_path, [reply(region(problem, 32, bug="syntax"))],
                        [reply(region(problem, 32), "Fixed the missing colon.")])
    with scripted_llm(monkeypatch, root) as fake:
        job_id = make_llm_job(sqlite_factory, problem, budget_iterations=1, repair_turns=1)
        run_job(sqlite_factory, job_id)
    assert len(fake.script.prompts) == 2
    repair_prompt = fake.script.prompts[1]
    assert "kernelband: repair turn=1" in repair_prompt and "syntax_error" in repair_prompt
    assert fake.script.prompts[0] in repair_prompt  # the same conversation, continued
    with session_scope(sqlite_factory) as session:
        turns = _generate_attempts(session, job_id)
        assert [a.payload.get("turn", 0) for a in turns] == [0, 1]
        assert len({a.decision_id for a in turns}) == 1  # one pull
        (child,) = _children(session, job_id)
        assert child.status == "measured" and child.turn == 1
        finished = events(session, job_id, "pull_finished")
        assert len(finished) == 1 and finished[0]["outcome"] == "measured"
        assert finished[0]["repair_turns"] == 1 and finished[0]["reward"] > 0
        track = repository.job_tracks(session, job_id)[0]
        assert track.iterations_done == 1 and load_state(track).t == 1  # counted once
        usage = session.scalars(select(LlmUsage).where(LlmUsage.job_id == job_id)).all()
        job = session.get_one(Job, job_id)
        assert len(usage) == 2 and job.tokens_used == sum(u.tokens for u in usage) > 0
        assert session.scalar(select(func.count(Transcript.id))) == 2


def test_wrong_result_repair_message_names_the_public_case_only(
        sqlite_factory: sessionmaker[Session], problem: KernelProblem, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_script(tmp_path, [reply(region(problem, 128, bug="wrong"))],
                        [reply(region(problem, 128))])
    with scripted_llm(monkeypatch, root) as fake:
        job_id = make_llm_job(sqlite_factory, problem, budget_iterations=1)
        run_job(sqlite_factory, job_id)
    repair_prompt = fake.script.prompts[1]
    assert "reason: wrong_result" in repair_prompt and "max_abs_err" in repair_prompt
    assert "first failing case n1000: n=1000, dtype=float32" in repair_prompt
    assert not any(name in repair_prompt for name in HELD_OUT_NAMES)
    with session_scope(sqlite_factory) as session:
        first, fixed = _children(session, job_id)
        assert first.status == "rejected" and first.reason == "wrong_result"
        assert fixed.repair_of == first.id and fixed.status == "measured"
        assert len(events(session, job_id, "pull_finished")) == 1


def test_token_budget_stops_repairs(sqlite_factory: sessionmaker[Session],
                                    problem: KernelProblem, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_script(tmp_path, [reply(region(problem, 256, bug="syntax"))],
                        [reply(region(problem, 256))])
    with scripted_llm(monkeypatch, root) as fake:
        job_id = make_llm_job(sqlite_factory, problem, budget_iterations=3, budget_tokens=100,
                              repair_turns=2)
        run_job(sqlite_factory, job_id)
    assert len(fake.script.prompts) == 1  # the first reply spent the budget: no repair sent
    with session_scope(sqlite_factory) as session:
        assert len(_generate_attempts(session, job_id)) == 1
        (finished,) = events(session, job_id, "pull_finished")
        assert finished["outcome"].startswith("syntax_error") and finished["repair_turns"] == 0
        assert not events(session, job_id, "repair_requested")


def test_turn_limit_ends_the_pull_with_its_last_failure(
        sqlite_factory: sessionmaker[Session], problem: KernelProblem, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    broken = reply(region(problem, 256, bug="syntax"))
    root = write_script(tmp_path, [broken], [reply("no code, sorry"), broken])
    with scripted_llm(monkeypatch, root) as fake:
        job_id = make_llm_job(sqlite_factory, problem, budget_iterations=1, repair_turns=2)
        run_job(sqlite_factory, job_id)
    assert len(fake.script.prompts) == 3
    with session_scope(sqlite_factory) as session:
        assert [a.payload.get("turn", 0) for a in _generate_attempts(session, job_id)] == [0, 1, 2]
        (finished,) = events(session, job_id, "pull_finished")
        assert finished["reward"] == 0 and finished["repair_turns"] == 2
        track = repository.job_tracks(session, job_id)[0]
        assert load_state(track).t == 1


def test_rules_generator_does_not_repair(sqlite_factory: sessionmaker[Session],
                                         problem: KernelProblem) -> None:
    from loop_kit import run_job as run

    with session_scope(sqlite_factory) as session:
        team = repository.get_or_create_team(session, "rules-team")
        row = repository.get_or_create_problem(session, team.id, problem.name, problem.format,
                                               problem.source, problem.to_dict(),
                                               problem.content_hash)
        job_id = repository.create_job(session, team.id, row.id, ("cpu",), budget_iterations=2,
                                       parallelism=1, repair_turns=3).id
    run(sqlite_factory, job_id)
    with session_scope(sqlite_factory) as session:
        assert all(a.payload.get("turn", 0) == 0 for a in _generate_attempts(session, job_id))
        assert not events(session, job_id, "repair_requested")
