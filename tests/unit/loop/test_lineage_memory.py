"""Lineage memory: the prompt carries the parent's lineage with speedups and the last attempts
on the same (parent, strategy) with their outcomes; held-out failures say nothing more."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import repository
from kernelband.db.models import Candidate, Measurement, Track
from kernelband.db.session import session_scope
from kernelband.generate import GenerationRequest, render_prompt
from kernelband.loop.memory import memory_lines
from kernelband.problem.model import KernelProblem


def _measured(s: Session, track: Track, parent: Candidate | None, time_ms: float,
              strategy: str | None) -> Candidate:
    c = Candidate(track_id=track.id, parent_id=parent.id if parent else None, editable="x",
                  strategy=strategy, status="measured",
                  lineage_depth=parent.lineage_depth + 1 if parent else 0)
    s.add(c)
    s.flush()
    s.add(Measurement(candidate_id=c.id, label="estimated", method="cost-model", device="cpu",
                      target="cpu", time_ms=time_ms))
    return c


def test_memory_lists_lineage_and_recent_outcomes(sqlite_factory: sessionmaker[Session],
                                                  problem: KernelProblem) -> None:
    with session_scope(sqlite_factory) as s:
        team = repository.get_or_create_team(s, "t")
        row = repository.get_or_create_problem(s, team.id, "p", "native", "src", {}, "h" * 64)
        job = repository.create_job(s, team.id, row.id, ("cpu",))
        track = Track(job_id=job.id, target="cpu", status="running", original_time_ms=2.0)
        s.add(track)
        s.flush()
        original = _measured(s, track, None, 2.0, None)
        parent = _measured(s, track, original, 1.0, "tiling")
        s.add_all([
            Candidate(track_id=track.id, parent_id=parent.id, strategy="fusion", editable="a",
                      status="rejected", reason="wrong_result", lineage_depth=2),
            Candidate(track_id=track.id, parent_id=parent.id, strategy="fusion", editable="b",
                      status="rejected", reason="held_out:wrong_result:case n3001",
                      lineage_depth=2),
            Candidate(track_id=track.id, parent_id=parent.id, strategy="pipeline",
                      editable="c", status="rejected", reason="timeout", lineage_depth=2),
        ])
        s.flush()
        lines = memory_lines(s, track, parent, "fusion")
    assert lines[0] == "lineage: original kernel, speedup 1.000x (estimated)"
    assert lines[1] == f"lineage: #{parent.id} (tiling), speedup 2.000x (estimated)"
    assert any(line.endswith("rejected: wrong_result") for line in lines)
    assert any(line.endswith("rejected on cases not shown to you") for line in lines)
    assert not any("n3001" in line or "timeout" in line for line in lines)  # other strategy
    request = replace(GenerationRequest(problem, problem.editable, "fusion"), memory=tuple(lines))
    user = render_prompt(request).user
    assert "## What was already tried (do not repeat it)" in user and lines[1] in user
