"""Transcripts: every generation and repair turn is stored (secrets scrubbed) and a job's
export replays offline through `kernelband fake-llm --replay`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loop_kit import LLM_KEY, make_llm_job, region, reply, run_job, scripted_llm, write_script
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from kernelband.db import repository
from kernelband.db.models import Attempt, Candidate, Transcript
from kernelband.db.session import session_scope
from kernelband.generate.replay import ReplayScript
from kernelband.loop.transcripts import job_transcripts, transcript_dict
from kernelband.problem.model import KernelProblem

LEAK = "api_key = sk-live-abcdef0123456789"


def _children(session: Session, job_id: int) -> list[str]:
    track = repository.job_tracks(session, job_id)[0]
    return list(session.scalars(select(Candidate.editable).where(
        Candidate.track_id == track.id, Candidate.id != track.original_candidate_id)
        .order_by(Candidate.id)))


def test_turns_are_stored_scrubbed_and_replay_offline(
        sqlite_factory: sessionmaker[Session], problem: KernelProblem, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_script(tmp_path / "script",
                        [reply(region(problem, 32, bug="wrong"), f"Note: {LEAK}")],
                        [reply(region(problem, 32))])
    with scripted_llm(monkeypatch, root):
        job_a = make_llm_job(sqlite_factory, problem, budget_iterations=1)
        run_job(sqlite_factory, job_a)
    with session_scope(sqlite_factory) as session:
        rows = job_transcripts(session, job_a)
        assert [r.turn for r in rows] == [0, 1]
        assert "sk-live-abcdef" not in rows[0].reply and "[redacted]" in rows[0].reply
        assert all(LLM_KEY not in json.dumps(r.messages) for r in rows)
        assert rows[1].messages[-1]["content"].startswith("<!-- kernelband: repair turn=1")
        results = session.scalars(select(Attempt.result).where(
            Attempt.job_id == job_a, Attempt.kind == "generate")).all()
        assert all("messages" not in r and "reply" not in r for r in results)
        export = {"job_id": job_a, "transcripts": [transcript_dict(r) for r in rows]}
        expected = _children(session, job_a)
    path = tmp_path / "job.transcripts.json"
    path.write_text(json.dumps(export))
    with scripted_llm(monkeypatch, script=ReplayScript(path)) as fake:
        job_b = make_llm_job(sqlite_factory, problem, team="replay", budget_iterations=1)
        run_job(sqlite_factory, job_b)
    assert len(fake.script.requests) == 2
    with session_scope(sqlite_factory) as session:
        assert _children(session, job_b) == expected
        assert len(session.scalars(select(Transcript).where(Transcript.job_id == job_b)).all()) == 2


def test_replay_command_explains_a_bad_export(tmp_path: Path) -> None:
    import typer

    from kernelband.commands import fake_llm

    app = typer.Typer()
    fake_llm.register(app)
    app.command("noop")(lambda: None)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    result = CliRunner().invoke(app, ["fake-llm", "--replay", str(bad)])
    assert result.exit_code == 2 and "transcripts" in result.output
