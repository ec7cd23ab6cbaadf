"""A job runs end to end on real processes: scheduler + Celery workers + Postgres + Redis."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.models import Attempt, Job, Measurement, Track, Worker
from kernelband.db.session import session_scope
from tests.utils.processes import ManagedProcess, wait_finished, wait_for

pytestmark = pytest.mark.integration


def attempts_per_kind(factory: sessionmaker[Session], job_id: int) -> dict[str, int]:
    with session_scope(factory) as session:
        kinds = session.scalars(select(Attempt.kind).where(Attempt.job_id == job_id))
        return dict(Counter(kinds))


def test_job_completes_on_cpu_target_and_best_passes_held_out(
        factory: sessionmaker[Session], make_job: Callable[..., int],
        workers: list[ManagedProcess], schedulers: Callable[[str], ManagedProcess],
        log_dir: Path) -> None:
    job_id = make_job("vector_add", ("cpu",), budget_iterations=4, parallelism=2)
    started = time.monotonic()
    scheduler = schedulers("a")
    status = wait_finished(factory, job_id, (scheduler, *workers))
    elapsed = time.monotonic() - started
    with session_scope(factory) as session:
        job = session.get_one(Job, job_id)
        (track,) = session.scalars(select(Track).where(Track.job_id == job_id)).all()
        open_attempts = session.scalar(select(func.count()).select_from(Attempt).where(
            Attempt.job_id == job_id, Attempt.state.in_(("pending", "dispatched", "expired"))))
        labels = set(session.scalars(select(Measurement.label)))
        reason = job.reason
    assert status == "completed", f"job ended {status}: {reason}\n{scheduler.log_tail()}"
    assert track.held_out == "passed" and track.best_label == "estimated"
    assert track.iterations_done == 4 and open_attempts == 0
    assert labels == {"estimated"}  # no GPU here: never called a measurement
    kinds = attempts_per_kind(factory, job_id)
    report = json.dumps({
        "what": "vector_add, target cpu, rules generator, 4 iterations, parallelism 2, "
                "1 scheduler + llm worker + cpu worker (-c 2), real Postgres and Redis",
        "end_to_end_s": round(elapsed, 2), "attempts_per_kind": kinds,
        "best_speedup_estimated": track.best_speedup, "held_out": track.held_out,
    }, indent=2)
    (log_dir / "example_job.json").write_text(report + "\n")
    print(report)  # shown with `pytest -s`: the figures quoted in reports come from here


def test_workers_heartbeat_without_database_credentials(
        factory: sessionmaker[Session], workers: list[ManagedProcess],
        schedulers: Callable[[str], ManagedProcess]) -> None:
    scheduler = schedulers("a")

    def rows() -> list[Worker]:
        with session_scope(factory) as session:
            return list(session.scalars(select(Worker)))

    wait_for(lambda: {"llm", "cpu"} <= {w.queue for w in rows()}, 60,
             "worker heartbeats in the workers table", processes=(scheduler, *workers))
    by_queue = {w.queue: w for w in rows()}
    for queue in ("llm", "cpu"):
        versions = by_queue[queue].versions
        assert versions["holds_database_credentials"] is False  # the poison URL was dropped
        assert versions["triton"] != "missing" and versions["torch"] != "missing"
    assert "scheduler" in by_queue  # the leader's own liveness row


def test_two_targets_make_two_tracks(
        factory: sessionmaker[Session], make_job: Callable[..., int],
        workers: list[ManagedProcess], h100_worker: ManagedProcess,
        schedulers: Callable[[str], ManagedProcess]) -> None:
    job_id = make_job("vector_add", ("cpu", "h100"), budget_iterations=2, parallelism=2)
    scheduler = schedulers("a")
    status = wait_finished(factory, job_id, (scheduler, h100_worker, *workers))
    with session_scope(factory) as session:
        tracks = {t.target: t for t in session.scalars(select(Track).where(Track.job_id == job_id))}
        queues = set(session.scalars(select(Attempt.queue).where(Attempt.job_id == job_id)))
        targets = set(session.scalars(select(Measurement.target)))
    assert status == "completed" and set(tracks) == {"cpu", "h100"}
    assert {"llm", "cpu", "gpu.h100"} <= queues  # each track measured on its own queue
    assert targets == {"cpu", "h100"}
    assert all(t.iterations_done == 2 for t in tracks.values())
