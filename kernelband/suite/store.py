"""Suites in the database: load problems, create one job per (problem, policy), read results."""

from __future__ import annotations

import contextvars
import os
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.db import repository
from kernelband.db.models import (
    FINISHED_JOB_STATUSES,
    Attempt,
    Job,
    Measurement,
    Problem,
    Suite,
    Track,
)
from kernelband.problem.model import KernelProblem, ProblemLoadError
from kernelband.profile.perf_harness import HarnessError, with_perf_harness
from kernelband.scheduling.stages import StageTime, stage_times
from kernelband.speedups import ShownSpeedup, of_track
from kernelband.suite.metrics import CORRECT_HELD_OUT, ProblemResult, suite_metrics
from kernelband.suite.model import LoadFailure, SuiteReport, SuiteSettings
from kernelband.suite.sources import SuiteSource
from kernelband.suite.throughput import AttemptSpan, TargetThroughput, by_target

# (source, format, name) -> KernelProblem; raises ProblemLoadError (the sandboxed loader).
Loader = Callable[[str, str, str], KernelProblem]


class SuiteNotFoundError(LookupError):
    """No suite with this id for this team."""


# Problems of one suite loaded at once: each load is a sandboxed child process of its own
# (seconds on a GPU node: the child imports torch and triton), so a suite of 8 files loaded one
# after another kept a node's GPUs waiting about 30 s before its first measurement.
MAX_PARALLEL_LOADS = 8


def load_sources(sources: Sequence[SuiteSource], format: str, loader: Loader,
                 parallel: int | None = None) -> tuple[list[KernelProblem], list[LoadFailure]]:
    """Load every source; a refused file becomes a LoadFailure instead of failing the suite.

    Up to `parallel` loads run at once (default: the CPU count, at most MAX_PARALLEL_LOADS),
    each in a copy of the caller's context, so limits set with `job_limits` apply to all of
    them; results keep the order of `sources`."""
    workers = max(1, min(len(sources), parallel or min(os.cpu_count() or 1, MAX_PARALLEL_LOADS)))
    if workers == 1:
        outcomes = [_load_one(item, format, loader) for item in sources]
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="suite-load") as pool:
            futures = [pool.submit(contextvars.copy_context().run, _load_one, item, format, loader)
                       for item in sources]
            outcomes = [future.result() for future in futures]
    loaded = [outcome for outcome in outcomes if isinstance(outcome, KernelProblem)]
    failures = [outcome for outcome in outcomes if isinstance(outcome, LoadFailure)]
    return loaded, failures


def _load_one(item: SuiteSource, format: str, loader: Loader) -> KernelProblem | LoadFailure:
    """One source loaded with its performance harness, or the reason it was refused."""
    try:
        return with_perf_harness(loader(item.source, format, item.name), item.perf_source)
    except ProblemLoadError as exc:
        return LoadFailure(item.name, exc.reason, exc.line)
    except HarnessError as exc:
        return LoadFailure(item.name, f"performance harness: {exc}", None)


def new_suite_id() -> str:
    """A short random id, also written into `jobs.suite_id`."""
    return f"suite-{uuid.uuid4().hex[:16]}"


def create_suite(session: Session, team_id: int, name: str, format: str,
                 problems: Sequence[KernelProblem], failures: Sequence[LoadFailure],
                 settings: SuiteSettings) -> Suite:
    """Store the suite, its problems and one queued job per (problem, policy)."""
    suite = Suite(id=new_suite_id(), team_id=team_id, name=name, format=format,
                  settings=settings.to_dict(), load_failures=[f.to_dict() for f in failures])
    session.add(suite)
    session.flush()
    generator = "llm" if settings.model else "rules"
    for problem in problems:
        row = repository.get_or_create_problem(session, team_id, problem.name, problem.format,
                                               problem.source, problem.to_dict(),
                                               problem.content_hash)
        for policy in settings.policies:
            repository.create_job(
                session, team_id, row.id, settings.targets, policy=policy,
                generator=generator, model=settings.model, seed=settings.seed,
                budget_iterations=settings.budget, parallelism=settings.parallelism,
                limits=dict(settings.limits), suite_id=suite.id)
    return suite


def get_suite(session: Session, suite_id: str, team_id: int | None = None) -> Suite:
    """A suite by id; `team_id` restricts to that team's suites (another team's is not found)."""
    suite = session.get(Suite, suite_id)
    if suite is None or (team_id is not None and suite.team_id != team_id):
        raise SuiteNotFoundError(f"suite {suite_id} not found; use the id returned when the "
                                 "suite was created")
    return suite


def suite_report(session: Session, suite_id: str, team_id: int | None = None) -> SuiteReport:
    """Metrics table, per-problem table and load failures of a suite, as stored now."""
    suite = get_suite(session, suite_id, team_id)
    query = (select(Job, Problem).join(Problem, Problem.id == Job.problem_id)
             .where(Job.suite_id == suite.id, Job.team_id == suite.team_id)
             .order_by(Problem.name, Job.id))
    jobs = session.execute(query).all()
    rows = [result for job, problem in jobs for result in _results(session, job, problem.name)]
    rows.sort(key=lambda r: (r.target, r.policy, r.problem))
    return SuiteReport(
        suite_id=suite.id, name=suite.name, format=suite.format,
        settings=SuiteSettings.from_dict(suite.settings), created_at=suite.created_at,
        job_ids=tuple(job.id for job, _ in jobs),
        jobs_finished=sum(job.status in FINISHED_JOB_STATUSES for job, _ in jobs),
        metrics=tuple(suite_metrics(rows)), problems=tuple(rows),
        load_failures=tuple(LoadFailure.from_dict(f) for f in suite.load_failures))


def _results(session: Session, job: Job, problem: str) -> list[ProblemResult]:
    """One result per target of the job; a target without a track yet is still listed."""
    tracks = {t.target: t for t in session.scalars(select(Track).where(Track.job_id == job.id))}
    out = []
    for target in job.targets:
        track = tracks.get(target)
        if track is None:
            out.append(ProblemResult(problem, job.policy, target, job.id, job.status, False,
                                     None, None, None, job.reason))
            continue
        correct = track.status == "completed" and track.held_out in CORRECT_HELD_OUT
        original, best = (_times(session, track.original_candidate_id, target),
                          _times(session, track.best_candidate_id, target))
        shown = of_track(track) if correct else ShownSpeedup(None)
        out.append(ProblemResult(
            problem, job.policy, target, job.id, track.status, correct,
            shown.point, track.best_label, track.held_out,
            track.reason or track.held_out_reason, original_ms=track.original_time_ms,
            best_ms=track.best_time_ms, original_case_ms=original[0], best_case_ms=best[0],
            method=best[1] or original[1], speedup_low=shown.low, speedup_high=shown.high,
            speedup_method=shown.method))
    return out


def _times(session: Session, candidate_id: int | None,
           target: str) -> tuple[dict[str, float], str | None]:
    """Per-case ms and method of a candidate's latest measurement on `target`."""
    if candidate_id is None:
        return {}, None
    row = session.scalars(select(Measurement).where(
        Measurement.candidate_id == candidate_id, Measurement.target == target)
        .order_by(Measurement.id.desc()).limit(1)).first()
    if row is None:
        return {}, None
    cases = {str(item[0]): float(item[1]) for item in row.case_times or []
             if isinstance(item, list | tuple) and len(item) == 2}
    return cases, f"{row.label}: {row.method} on {row.device}"


def suite_steps(session: Session, suite_id: str) -> tuple[StageTime, ...]:
    """Where the suite's time went, per task kind over all its jobs (`scheduling.stages`)."""
    job_ids = session.scalars(select(Job.id).where(Job.suite_id == suite_id)).all()
    return tuple(stage_times(session, job_ids))


def suite_throughput(session: Session, suite_id: str) -> tuple[TargetThroughput, ...]:
    """Per target of the suite, from its attempts that a worker started and finished."""
    rows = session.execute(
        select(Track.target, Attempt.kind, Attempt.started_at, Attempt.finished_at)
        .join(Track, Track.id == Attempt.track_id).join(Job, Job.id == Attempt.job_id)
        .where(Job.suite_id == suite_id, Attempt.started_at.is_not(None), Attempt.finished_at.is_not(None))
    ).all()
    # In-process workers record no name: every attempt of a target counts as one device.
    return by_target([AttemptSpan(r.target, r.kind, r.started_at, r.finished_at) for r in rows])
