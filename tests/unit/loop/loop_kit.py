"""Builders for generation-loop tests: a real vector_add problem, scripted replies served over
real HTTP, and the real task bodies (LLM generator, static checks, interpreter, estimate)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings, get_settings
from kernelband.db import repository
from kernelband.db.models import Event
from kernelband.db.session import session_scope
from kernelband.problem.model import KernelProblem
from kernelband.sandbox import load_problem_sandboxed
from kernelband.scheduling import tasks
from kernelband.scheduling.dispatch import InlineDispatcher
from kernelband.scheduling.lifecycle import job_is_finished
from kernelband.scheduling.pipeline import EngineContext, step
from tests.utils.fake_llm import FakeLLM, running_fake_llm

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "vector_add.py"
MODEL = "openai/kb-scripted"
LLM_KEY = "sk-loop-test-SECRET-4b7e21"
HELD_OUT_NAMES = ("n3001", "n777_fp16")


def vector_add() -> KernelProblem:
    return load_problem_sandboxed(EXAMPLE.read_text(), "native", "vector_add")


def region(problem: KernelProblem, block: int = 32, bug: str = "") -> str:
    """The editable region with another block size, optionally broken (on the cpu target's
    cost model, block 32 is estimated faster than the original's 64)."""
    code = problem.editable.replace("BLOCK_SIZE = 64", f"BLOCK_SIZE = {block}")
    if bug == "syntax":
        code = code.replace("def entry(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:",
                            "def entry(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor")
    elif bug == "wrong":
        code = code.replace("x + y, mask=mask", "x - y, mask=mask")
    return code


def reply(code: str, note: str = "Here is the rewrite.") -> str:
    return f"{note}\n\n```python\n{code}```\n"


def write_script(root: Path, first: list[str], repairs: list[str] | None = None) -> Path:
    """Replies for every strategy of vector_add: first turns in order, repair turns in order."""
    folder = root / "vector_add"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "default.json").write_text(json.dumps({"sequence": [{"text": t} for t in first]}))
    if repairs:
        (folder / "default.repair.json").write_text(
            json.dumps({"sequence": [{"text": t} for t in repairs]}))
    return root


@contextmanager
def scripted_llm(monkeypatch: pytest.MonkeyPatch, root: Path | None = None,
                 script: Any = None) -> Iterator[FakeLLM]:
    """The scripted server, with the worker settings pointing the LLM generator at it."""
    with running_fake_llm(root, script=script) as fake:
        monkeypatch.setenv("KERNELBAND_LLM_API_BASE", fake.api_base)
        monkeypatch.setenv("KERNELBAND_LLM_API_KEY", LLM_KEY)
        monkeypatch.setenv("KERNELBAND_LLM_MAX_RETRIES", "0")
        get_settings.cache_clear()
        tasks._generator.cache_clear()
        try:
            yield fake
        finally:
            get_settings.cache_clear()
            tasks._generator.cache_clear()


def make_llm_job(factory: sessionmaker[Session], problem: KernelProblem, team: str = "team-a",
                 **options: Any) -> int:
    """A queued job of `team` on vector_add (cpu target) using the scripted model."""
    with session_scope(factory) as session:
        row_team = repository.get_or_create_team(session, team)
        row = repository.get_or_create_problem(session, row_team.id, problem.name,
                                               problem.format, problem.source,
                                               problem.to_dict(), problem.content_hash)
        options.setdefault("budget_iterations", 1)
        options.setdefault("parallelism", 1)
        options.setdefault("seed", 1)
        return repository.create_job(session, row_team.id, row.id, ("cpu",), generator="llm",
                                     model=MODEL, **options).id


def run_job(factory: sessionmaker[Session], job_id: int, max_steps: int = 200) -> None:
    """Run the scheduler steps inline with the real task bodies until the job finishes."""
    functions = {"generate": tasks.generate, "compile": tasks.compile,
                 "profile": tasks.profile, "verify": tasks.verify}
    ctx = EngineContext(factory, InlineDispatcher(functions), Settings())
    for _ in range(max_steps):
        step(ctx)
        if job_is_finished(factory, job_id):
            return
    raise AssertionError(f"job {job_id} did not finish in {max_steps} steps")


def events(session: Session, job_id: int, kind: str) -> list[dict[str, Any]]:
    query = select(Event.payload).where(Event.job_id == job_id, Event.kind == kind)
    return list(session.scalars(query.order_by(Event.seq)))
