"""The team skill library: job B of a team retrieves job A's verified improvement as its
one-shot example; another team's job never does; a team can switch it off and delete it."""

from __future__ import annotations

from pathlib import Path

import pytest
from loop_kit import make_llm_job, region, reply, run_job, scripted_llm, write_script
from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import repository
from kernelband.db.models import Skill, Team
from kernelband.db.session import session_scope
from kernelband.problem.model import KernelProblem

SKILL_TEXT = "faster than its parent"


def _run(factory: sessionmaker[Session], problem: KernelProblem, team: str,
         monkeypatch: pytest.MonkeyPatch, root: Path) -> list[str]:
    with scripted_llm(monkeypatch, root) as fake:
        run_job(factory, make_llm_job(factory, problem, team=team, budget_iterations=1,
                                      repair_turns=0))
        return list(fake.script.prompts)


def test_job_b_retrieves_job_a_improvement_and_other_teams_do_not(
        db_factory: sessionmaker[Session], problem: KernelProblem, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_script(tmp_path, [reply(region(problem, 32))])
    first = _run(db_factory, problem, "team-a", monkeypatch, root)
    assert SKILL_TEXT not in first[0]  # an empty bank: the built-in example
    with session_scope(db_factory) as session:
        (skill,) = session.scalars(select(Skill)).all()
        assert skill.strategy and skill.speedup > 1 and skill.label == "estimated"
        assert skill.before == problem.editable and "BLOCK_SIZE = 32" in skill.after
    job_b = _run(db_factory, problem, "team-a", monkeypatch, root)
    assert skill.description in job_b[0] and "BLOCK_SIZE = 32" in job_b[0]
    other_team = _run(db_factory, problem, "team-b", monkeypatch, root)
    assert SKILL_TEXT not in other_team[0]


def test_switched_off_library_neither_stores_nor_retrieves(
        db_factory: sessionmaker[Session], problem: KernelProblem, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_script(tmp_path, [reply(region(problem, 32))])
    _run(db_factory, problem, "team-a", monkeypatch, root)
    with session_scope(db_factory) as session:
        team = session.scalars(select(Team).where(Team.name == "team-a")).one()
        team.skill_library = False
    prompts = _run(db_factory, problem, "team-a", monkeypatch, root)
    assert SKILL_TEXT not in prompts[0]
    with session_scope(db_factory) as session:
        assert len(session.scalars(select(Skill)).all()) == 1  # nothing new was stored
        session.execute(delete(Skill).where(Skill.team_id == team.id))
        assert repository.get_or_create_team(session, "team-a").skill_library is False
