"""A child's profile task (and the best's final verify) carries its track's baseline: a paired
measurement's time is that baseline over the child's speedup against the original
(kernelband/profile/paired_timing.py)."""

from __future__ import annotations

from scheduling_fakes import FAKE_TASKS, make_job
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import Track
from kernelband.db.session import session_scope
from kernelband.scheduling.dispatch import InlineDispatcher
from kernelband.scheduling.lifecycle import job_is_finished
from kernelband.scheduling.pipeline import EngineContext, step


def test_profile_and_verify_tasks_after_the_original_carry_the_tracks_baseline(
        db_factory: sessionmaker[Session]) -> None:
    job_id = make_job(db_factory, targets=("h100",), budget_iterations=6)
    ctx = EngineContext(db_factory, InlineDispatcher(FAKE_TASKS), Settings())
    for _ in range(300):
        step(ctx)
        if job_is_finished(db_factory, job_id):
            break
    with session_scope(db_factory) as session:
        baseline = session.scalars(select(Track.original_time_ms).where(Track.job_id == job_id)).one()
    profiles = [m for m in ctx.dispatcher.submitted if m.kind == "profile"]  # type: ignore[attr-defined]
    assert baseline and len(profiles) >= 2
    first, *children = profiles
    assert "baseline_ms" not in first.payload  # the original sets the baseline
    assert {m.payload["baseline_ms"] for m in children} == {baseline}
    verifies = [m for m in ctx.dispatcher.submitted if m.kind == "verify"]  # type: ignore[attr-defined]
    assert verifies and all(m.payload["baseline_ms"] == baseline for m in verifies)
