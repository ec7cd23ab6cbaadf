"""Deterministic task bodies and job builders for engine tests (no GPU, no sandbox, no LLM).

Times depend only on the candidate text, so a re-run of a lost task returns the same result
and two runs of the same job see the same rewards.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db import repository
from kernelband.db.models import Candidate, Event, utcnow
from kernelband.db.session import session_scope
from kernelband.problem.model import Case, KernelProblem
from kernelband.scheduling.dispatch import InlineDispatcher
from kernelband.scheduling.lifecycle import job_is_finished
from kernelband.scheduling.pipeline import EngineContext, step

# Strategy effects on time: tiling helps a lot, fusion a little, the rest slightly hurt.
EFFECT = {"tiling": 0.8, "fusion": 0.95}
TOKENS_PER_GENERATION = 150
STATIC_FEATURES = {"phi": [0.5, 32.0, 0.0, 7.0, 50.0], "phi_sources": ["estimate"] + ["static"] * 4,
                   "h": [40.0, 60.0, 30.0], "h_sources": ["estimate"] * 3}  # a compile report's phi and h


_STEP = re.compile(r"# (\w+) seed=")


def fake_generate(payload: dict[str, Any]) -> dict[str, Any]:
    # one code line per step (a comment alone would make every child a duplicate of its parent)
    strategy, seed = payload["strategy"], payload["seed"]
    editable = f"{payload['parent_editable']}\nstep_{seed} = 0  # {strategy} seed={seed}"
    return {"ok": True, "editable": editable, "reason": "", "prompt_tokens": 100,
            "completion_tokens": 50, "cost_usd": 0.001, "cost_known": True, "model": "fake"}


def fake_compile(payload: dict[str, Any]) -> dict[str, Any]:
    if "# reordering" in payload["editable"].splitlines()[-1]:
        return {"ok": False, "reason": "compile_error:fake", "message": "reordering breaks"}
    return {"ok": True, "static_profile": {"registers": 32, "features": STATIC_FEATURES}}


def fake_time(editable: str) -> float:
    time = 1.0
    for line in editable.splitlines()[1:]:
        found = _STEP.search(line)
        time *= EFFECT.get(found.group(1) if found else "", 1.02)
    jitter = int(hashlib.sha256(editable.encode()).hexdigest()[:4], 16) / 65535 / 100
    return time * (1 + jitter)


def fake_profile(payload: dict[str, Any]) -> dict[str, Any]:
    time = fake_time(payload["editable"])
    measurement = {"label": "estimated", "method": "fake-cost-model", "device": "fake",
                   "target": payload["target"], "time_ms": time, "case_times_ms": [time],
                   "cv": 0.0, "noisy": False, "paired_ratio": None}
    features = {"phi": [math.log1p(time), 32, 0, 7, 50], "h": [40.0, 60.0, 30.0],
                "h_sources": ["estimate"]}
    return {"ok": True, "measurement": measurement, "features": features}


def fake_verify(payload: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "verdict": {"correct": True, "held_out_checked": 2}}


FAKE_TASKS = {"generate": fake_generate, "compile": fake_compile, "profile": fake_profile,
              "verify": fake_verify}


def _slow(function: Any) -> Any:
    def run(payload: dict[str, Any]) -> dict[str, Any]:
        time.sleep(0.15)  # long enough for a test to kill the process mid-job
        return function(payload)  # type: ignore[no-any-return]
    return run


SLOW_FAKE_TASKS = {kind: _slow(function) for kind, function in FAKE_TASKS.items()}
TOY_SOURCE = "import x\n# kernelband: editable begin\nORIGINAL\n# kernelband: editable end\n"


def toy_problem() -> KernelProblem:
    """A problem value for the fake tasks (never executed)."""
    return KernelProblem(name="toy", format="native", source=TOY_SOURCE, editable="ORIGINAL",
                         entry="entry", kernel_names=("k",), cases=(Case("c1", {"n": 4}),),
                         held_out_cases=(Case("h1", {"n": 5}, held_out=True),))


def decisions(session: Session, job_id: int) -> list[tuple[Any, ...]]:
    """Decisions as (strategy, cluster, parent lineage depth): ids differ between jobs."""
    events = session.scalars(select(Event).where(Event.job_id == job_id,
                                                 Event.kind == "pull_selected")
                             .order_by(Event.seq)).all()
    out = []
    for event in events:
        parent = session.get_one(Candidate, int(event.payload["parent_id"]))
        out.append((event.payload["strategy"], event.payload["cluster"], parent.lineage_depth))
    return out


def make_job(factory: sessionmaker[Session], targets: tuple[str, ...] = ("cpu",),
             **options: Any) -> int:
    """A team, a problem and a queued job; returns the job id."""
    with session_scope(factory) as session:
        team = repository.get_or_create_team(session, "team-a")
        problem = repository.get_or_create_problem(
            session, team.id, "toy", "native", "ORIGINAL", {"editable": "ORIGINAL"}, "h" * 64)
        options.setdefault("budget_iterations", 6)
        options.setdefault("parallelism", 1)
        options.setdefault("seed", 7)
        return repository.create_job(session, team.id, problem.id, targets, **options).id


class Clock:
    """A clock the test moves by hand (lease expiry without sleeping)."""

    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def context(factory: sessionmaker[Session], dispatcher: Any = None, **settings: Any) -> EngineContext:
    return EngineContext(factory, dispatcher or InlineDispatcher(FAKE_TASKS),
                         Settings(**settings), clock=Clock())


def run_to_end(ctx: EngineContext, job_id: int, max_steps: int = 300) -> int:
    for steps in range(1, max_steps + 1):
        step(ctx)
        if job_is_finished(ctx.factory, job_id):
            return steps
    raise AssertionError(f"job {job_id} did not finish in {max_steps} steps")
