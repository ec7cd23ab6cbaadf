"""Embedded mode: one process, a SQLite file, the same engine steps, a thread-pool dispatcher."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db import repository
from kernelband.db.models import Attempt, Candidate, Job, Track
from kernelband.db.session import open_database, session_scope
from kernelband.default_policy import DEFAULT_POLICY
from kernelband.scheduling.collector import PassCollector
from kernelband.scheduling.dispatch import EmbeddedDispatcher, TaskFunction, embedded_pool_sizes
from kernelband.scheduling.leases import requeue_orphans
from kernelband.scheduling.lifecycle import job_is_finished
from kernelband.scheduling.pipeline import EngineContext, StepReport, step
from kernelband.scheduling.stages import StageTime, stage_times
from kernelband.speedups import of_track

LOCAL_TEAM = "local"


@dataclass(frozen=True)
class JobOptions:
    """What `kernelband optimize` asks for."""

    targets: tuple[str, ...] = ("cpu",)
    policy: str = DEFAULT_POLICY
    policy_params: dict[str, Any] = field(default_factory=dict)
    budget: int = 20
    model: str = ""
    parallel: int = 2
    seed: int = 0
    budget_tokens: int | None = None
    budget_usd: float | None = None
    budget_wall_s: float | None = None
    repair_turns: int = 1  # LLM only; see docs/generation-loop.md
    dedupe: bool = True
    limits: dict[str, float] = field(default_factory=dict)  # sandbox limits (JOB_LIMITS)


@dataclass(frozen=True)
class TrackOutcome:
    """The final result of one target."""

    target: str
    status: str
    reason: str | None
    original_time_ms: float | None
    best_time_ms: float | None
    best_speedup: float | None
    label: str | None
    held_out: str | None
    best_editable: str | None
    best_candidate_id: int | None
    lineage: tuple[str, ...]
    iterations_done: int
    # The best's speedup as shown to people: its paired interval, an estimate or "not measured".
    speedup_text: str = "not measured"


@dataclass(frozen=True)
class JobOutcome:
    """The final result of an embedded job, with the numbers the CLI reports."""

    job_id: int
    status: str
    reason: str | None
    tracks: tuple[TrackOutcome, ...]
    tokens: int
    cost_usd: float
    cost_known: bool
    wall_s: float
    attempts: dict[str, int]
    database_url: str
    resumed: bool = False
    stages: tuple[StageTime, ...] = ()  # where the job's time went, per task kind


def job_columns(options: JobOptions) -> dict[str, Any]:
    """The Job columns an embedded job is created with (and matched on when resuming)."""
    return {"targets": list(options.targets), "policy": options.policy,
            "policy_params": dict(options.policy_params),
            "generator": "llm" if options.model else "rules", "model": options.model,
            "seed": options.seed, "budget_iterations": options.budget,
            "parallelism": options.parallel, "budget_tokens": options.budget_tokens,
            "budget_usd": options.budget_usd, "budget_wall_s": options.budget_wall_s,
            "repair_turns": options.repair_turns, "dedupe": options.dedupe,
            "limits": dict(options.limits)}


def submit_local_job(factory: sessionmaker[Session], problem: Any,
                     options: JobOptions) -> tuple[int, bool]:
    """The unfinished job of an earlier, interrupted run with the same problem and options
    (resumed: True), else a newly queued one."""
    columns = job_columns(options)
    with session_scope(factory) as session:
        team = repository.get_or_create_team(session, LOCAL_TEAM)
        row = repository.get_or_create_problem(session, team.id, problem.name, problem.format,
                                               problem.source, problem.to_dict(),
                                               problem.content_hash)
        unfinished = session.scalars(select(Job).where(
            Job.problem_id == row.id, Job.status.in_(("queued", "running")),
            Job.cancel_requested.is_(False)).order_by(Job.id))
        for job in unfinished:
            if all(getattr(job, name) == value for name, value in columns.items()):
                return job.id, True
        targets = columns.pop("targets")
        return repository.create_job(session, team.id, row.id, targets, **columns).id, False


def run_local_job(settings: Settings, problem: Any, options: JobOptions,
                  on_step: Callable[[StepReport, dict[str, int]], None] | None = None,
                  functions: Mapping[str, TaskFunction] | None = None) -> JobOutcome:
    """Run one job to completion in this process and return its outcome."""
    started = time.monotonic()
    url = settings.effective_database_url
    engine, factory = open_database(url, migrate=True)
    workers, gpu_tasks = embedded_pool_sizes(options.parallel, options.targets, settings.gpu_tasks_per_device)
    dispatcher = EmbeddedDispatcher(max_workers=workers, functions=functions, gpu_tasks=gpu_tasks)
    ctx = EngineContext(factory, dispatcher, settings)
    job_id, resumed = submit_local_job(factory, problem, options)
    with session_scope(factory) as session:  # this process is the only scheduler of the file
        requeue_orphans(session, settings.max_tries)
    collector = PassCollector()  # garbage collection between steps only
    collector.start()
    try:
        while not job_is_finished(factory, job_id):
            report = step(ctx, drain_timeout_s=settings.poll_interval_s)
            if on_step:
                on_step(report, progress(factory, job_id))
            collector.between_passes()
    except KeyboardInterrupt:
        with session_scope(factory) as session:
            repository.request_cancel(session, job_id)
        step(ctx)
    finally:
        collector.stop()
        dispatcher.close()
    outcome = collect_outcome(factory, job_id, time.monotonic() - started, url, resumed)
    engine.dispose()
    return outcome


def progress(factory: sessionmaker[Session], job_id: int) -> dict[str, int]:
    """Iterations done and budgeted over all tracks of a job."""
    with session_scope(factory) as session:
        job = session.get_one(Job, job_id)
        done = session.scalar(select(func.sum(Track.iterations_done))
                              .where(Track.job_id == job_id)) or 0
        return {"done": int(done), "total": job.budget_iterations * len(job.targets)}


def collect_outcome(factory: sessionmaker[Session], job_id: int, wall_s: float,
                    url: str, resumed: bool = False) -> JobOutcome:
    """Read the finished job back from the database."""
    with session_scope(factory) as session:
        job = session.get_one(Job, job_id)
        tracks = tuple(_track_outcome(session, t) for t in repository.job_tracks(session, job_id))
        rows = session.execute(select(Attempt.kind, func.count()).where(Attempt.job_id == job_id)
                               .group_by(Attempt.kind)).all()
        return JobOutcome(job.id, job.status, job.reason, tracks, job.tokens_used, job.cost_usd,
                          job.cost_known, wall_s, {kind: int(n) for kind, n in rows}, url,
                          resumed, tuple(stage_times(session, job_id)))


def _track_outcome(session: Session, track: Track) -> TrackOutcome:
    best = session.get(Candidate, track.best_candidate_id) if track.best_candidate_id else None
    return TrackOutcome(
        track.target, track.status, track.reason, track.original_time_ms, track.best_time_ms,
        track.best_speedup, track.best_label, track.held_out, best.editable if best else None,
        best.id if best else None, lineage(session, best), track.iterations_done,
        of_track(track).text())


def lineage(session: Session, candidate: Candidate | None) -> tuple[str, ...]:
    """Strategies from the original to `candidate`, oldest first."""
    steps: list[str] = []
    while candidate is not None and candidate.parent_id is not None:
        steps.append(candidate.strategy or "free")
        candidate = session.get(Candidate, candidate.parent_id)
    return tuple(reversed(steps))


def provenance_header(outcome: JobOutcome, track: TrackOutcome, problem_name: str) -> str:
    """Comment lines saying where a written kernel came from and how it was judged."""
    return "\n".join([
        f"# Optimized by KernelBand (job {outcome.job_id}, problem {problem_name!r}, "
        f"target {track.target}).",
        f"# Speedup vs original: {track.speedup_text} ({track.label or 'unlabelled'}; "
        f"{_ms(track.original_time_ms)} ms -> {_ms(track.best_time_ms)} ms).",
        f"# Held-out cases: {track.held_out or 'not checked'}. "
        f"Strategy lineage: {' -> '.join(track.lineage) or 'original'}.",
        f"# Iterations: {track.iterations_done}; LLM tokens: {outcome.tokens}.",
        "",
    ])


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def write_best(outcome: JobOutcome, problem: Any, out: Path) -> list[Path]:
    """Write each track's best kernel (full module with provenance); one file per target."""
    written: list[Path] = []
    for track in outcome.tracks:
        if track.best_editable is None or track.held_out == "untranslated":
            continue  # no kernel, or only the PyTorch placeholder (kernelband/loop/translate.py)
        path = out if len(outcome.tracks) == 1 else out.with_name(
            f"{out.stem}_{track.target}{out.suffix}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(provenance_header(outcome, track, problem.name)
                        + problem.splice(track.best_editable))
        written.append(path)
    return written


def parse_targets(values: Sequence[str]) -> tuple[str, ...]:
    """Targets from repeated and/or comma-separated options, validated and de-duplicated."""
    targets: list[str] = []
    for value in values:
        for part in value.split(","):
            name = part.strip().lower()
            if name and name not in targets:
                targets.append(name)
    unknown = [t for t in targets if t not in repository.KNOWN_TARGETS]
    if unknown or not targets:
        raise ValueError(f"unknown target(s) {', '.join(unknown) or '(none)'}; choose from "
                         f"{', '.join(repository.KNOWN_TARGETS)}")
    return tuple(targets)
