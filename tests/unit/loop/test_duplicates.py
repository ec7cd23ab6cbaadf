"""No duplicate evaluations: a child equal to one already in the track (comments, docstrings
and formatting aside) is recorded as its duplicate and never compiled or measured again."""

from __future__ import annotations

from pathlib import Path

import pytest
from loop_kit import events, make_llm_job, region, reply, run_job, scripted_llm, write_script
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import repository
from kernelband.db.models import Attempt, Candidate
from kernelband.db.session import session_scope
from kernelband.generate.normalize import source_hash
from kernelband.problem.model import KernelProblem


def _reformatted(code: str) -> str:
    """The same program: a docstring, comments, other quotes and spacing."""
    code = code.replace("def entry(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n",
                        'def entry(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n'
                        '    """Add two vectors."""\n    # launch one program per block\n')
    return code.replace("n = x.numel()", "n  =  x.numel( )   # elements")


def test_normalised_source_ignores_comments_docstrings_and_formatting(
        problem: KernelProblem) -> None:
    code = region(problem, 32)
    assert source_hash(code) == source_hash(_reformatted(code))
    assert source_hash(code) != source_hash(region(problem, 128))


def test_duplicate_is_recorded_with_its_outcome_and_never_measured(
        sqlite_factory: sessionmaker[Session], problem: KernelProblem, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    code = region(problem, 32)
    root = write_script(tmp_path, [reply(code), reply(_reformatted(code)),
                                   reply(problem.editable.replace("pid = ", "pid  = "))])
    with scripted_llm(monkeypatch, root):
        job_id = make_llm_job(sqlite_factory, problem, budget_iterations=3, repair_turns=0)
        run_job(sqlite_factory, job_id)
    with session_scope(sqlite_factory) as session:
        track = repository.job_tracks(session, job_id)[0]
        children = session.scalars(select(Candidate).where(
            Candidate.track_id == track.id, Candidate.id != track.original_candidate_id)
            .order_by(Candidate.id)).all()
        first, again, same_as_original = children
        assert first.status == "measured"
        assert again.status == "duplicate" and again.duplicate_of == first.id
        assert again.reason is not None and again.reason.startswith(f"duplicate_of:{first.id} (measured")
        assert same_as_original.duplicate_of == track.original_candidate_id
        evaluated = session.scalars(select(Attempt.candidate_id).where(
            Attempt.job_id == job_id, Attempt.kind.in_(("compile", "profile")))).all()
        assert again.id not in evaluated and same_as_original.id not in evaluated
        assert len(events(session, job_id, "candidate_duplicate")) == 2
        assert len(events(session, job_id, "pull_finished")) == 3
