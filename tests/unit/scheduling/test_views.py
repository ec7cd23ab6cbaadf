"""The per-job version, bumped once by each scheduler transaction that changes the job; the
arm/cluster view rows derived from a policy state."""

from __future__ import annotations

import numpy as np
import pytest
from scheduling_fakes import FAKE_TASKS, make_job
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.bandit import FrontierEntry, PolicyState, make_policy
from kernelband.bandit.arms import cluster_members, open_arms
from kernelband.config import Settings
from kernelband.db.models import Job, Track, utcnow
from kernelband.db.session import session_scope
from kernelband.scheduling import views
from kernelband.scheduling.dispatch import InlineDispatcher
from kernelband.scheduling.events import append_event
from kernelband.scheduling.pipeline import EngineContext, step


def version(factory: sessionmaker[Session], job_id: int) -> int:
    with session_scope(factory) as session:
        return int(session.scalar(select(Job.version).where(Job.id == job_id)) or 0)


def test_a_transaction_with_events_bumps_the_version_once(
    db_factory: sessionmaker[Session],
) -> None:
    job_id = make_job(db_factory)
    before = version(db_factory, job_id)
    with session_scope(db_factory) as session:
        for _ in range(3):
            append_event(session, job_id, "note", {})
    assert version(db_factory, job_id) == before + 1
    with session_scope(db_factory) as session:  # reads only: nothing to tell pollers
        session.get_one(Job, job_id)
    assert version(db_factory, job_id) == before + 1


def test_a_rolled_back_transaction_leaves_the_version(db_factory: sessionmaker[Session]) -> None:
    job_id = make_job(db_factory)
    before = version(db_factory, job_id)
    with pytest.raises(RuntimeError), session_scope(db_factory) as session:
        append_event(session, job_id, "note", {})
        raise RuntimeError("roll back")
    assert version(db_factory, job_id) == before


def test_every_scheduler_step_that_changes_a_job_changes_its_version(
    db_factory: sessionmaker[Session],
) -> None:
    job_id = make_job(db_factory, budget_iterations=3)
    ctx = EngineContext(db_factory, InlineDispatcher(FAKE_TASKS), Settings())
    seen = [version(db_factory, job_id)]
    for _ in range(40):
        step(ctx)
        seen.append(version(db_factory, job_id))
        with session_scope(db_factory) as session:
            if session.get_one(Job, job_id).status == "completed":
                break
    assert seen == sorted(seen) and seen[-1] > seen[0] + 3  # never back, bumped along the way
    step(ctx)  # a finished job: nothing changes, the version stays
    assert version(db_factory, job_id) == seen[-1]


def _clustered_state() -> tuple[Job, PolicyState]:
    """A kernelband state after 60 pulls (re-clustered), with numeric kernel ids and ties."""
    job = Job(policy="kernelband", policy_params={})
    policy = make_policy("kernelband")
    rng = np.random.default_rng(5)
    state = policy.init_state(FrontierEntry("1", 10.0, (0.1, 32, 16, 7, 50), (40, 40, 40)), 5)
    for i in range(60):
        decision, state = policy.select(state)
        time_ms = float(rng.choice([8.0, 9.0, 9.5]))  # equal times: the first member wins
        child = FrontierEntry(str(i + 2), time_ms, tuple(rng.normal(size=5)),
                              None if i % 4 else tuple(rng.uniform(0, 100, size=3)))
        _, state = policy.update(state, decision.decision_id, child if i % 6 else None)
    assert state.n_clusters > 1
    return job, state


def test_cluster_rows_and_masks_match_a_plain_pass_over_the_frontier() -> None:
    job, state = _clustered_state()
    track = Track(id=1, job_id=1, target="cpu")
    rows = views.cluster_rows(track, state, utcnow())
    for row in rows:
        members = [e for e, label in zip(state.frontier, state.labels, strict=True)
                   if label == row["cluster"]]
        fastest = min(members, key=lambda e: e.time_ms) if members else None  # first on ties
        assert row["members"] == [e.kernel_id for e in members]
        assert row["size"] == len(members)
        assert row["representative_id"] == (int(fastest.kernel_id) if fastest else None)
    assert sum(row["size"] for row in rows) == len(state.frontier)
    theta = make_policy("kernelband").config.theta_sat  # type: ignore[attr-defined]
    plain = open_arms(state, cluster_members(state, len(state.arm_n)), np.array(theta))
    masks = [row["masked"] for row in views.arm_rows(job, track, state, utcnow())]
    assert masks == [not v for v in np.asarray(plain).ravel().tolist()]
