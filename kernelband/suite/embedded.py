"""Running a whole suite in this process (embedded mode: SQLite, thread-pool dispatcher)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db import repository
from kernelband.db.models import FINISHED_JOB_STATUSES, Job
from kernelband.db.session import open_database, session_scope
from kernelband.problem.model import KernelProblem
from kernelband.scheduling.dispatch import EmbeddedDispatcher, TaskFunction, embedded_pool_sizes
from kernelband.scheduling.pipeline import EngineContext, step
from kernelband.suite.model import LoadFailure, SuiteReport, SuiteSettings
from kernelband.suite.store import create_suite, suite_report, suite_steps, suite_throughput

LOCAL_TEAM = "local"
Progress = Callable[[int, int], None]  # (jobs finished, jobs in the suite)


def run_local_suite(settings: Settings, name: str, format: str,
                    problems: Sequence[KernelProblem], failures: Sequence[LoadFailure],
                    suite_settings: SuiteSettings, on_progress: Progress | None = None,
                    functions: Mapping[str, TaskFunction] | None = None) -> SuiteReport:
    """Create the suite under the local team, run every job to completion, return the report."""
    engine, factory = open_database(settings.effective_database_url, migrate=True)
    with session_scope(factory) as session:
        team = repository.get_or_create_team(session, LOCAL_TEAM)
        suite_id = create_suite(session, team.id, name, format, problems, failures,
                                suite_settings).id
    workers, gpu_tasks = pool_sizes(settings, suite_settings)
    dispatcher = EmbeddedDispatcher(max_workers=workers, functions=functions, gpu_tasks=gpu_tasks)
    ctx = EngineContext(factory, dispatcher, with_jobs_at_once(settings, suite_settings))
    try:
        while True:
            done, total = _counts(factory, suite_id)
            if on_progress:
                on_progress(done, total)
            if done >= total:
                break
            step(ctx, drain_timeout_s=settings.poll_interval_s)
    except KeyboardInterrupt:
        _cancel(factory, suite_id)
        step(ctx)
        raise
    finally:
        dispatcher.close()
    with session_scope(factory) as session:
        report = replace(suite_report(session, suite_id), throughput=suite_throughput(session, suite_id),
                         steps=suite_steps(session, suite_id))
    engine.dispose()
    return report


def with_jobs_at_once(settings: Settings, suite_settings: SuiteSettings) -> Settings:
    """A GPU suite's jobs run `warm_originals` at a time unless the settings cap them: finished
    jobs show early, and each problem's original stays warm in the GPU worker between its
    candidates. A CPU-target suite runs every job at once, as it always has."""
    if settings.max_running_jobs_per_team or all(t == "cpu" for t in suite_settings.targets):
        return settings
    return settings.model_copy(update={"max_running_jobs_per_team": settings.warm_originals})


def pool_sizes(settings: Settings, suite_settings: SuiteSettings) -> tuple[int, int]:
    """(threads of the llm and cpu queues' pool, tasks at once per GPU queue) of a suite."""
    return embedded_pool_sizes(suite_settings.parallelism, suite_settings.targets,
                               settings.gpu_tasks_per_device)


def _counts(factory: sessionmaker[Session], suite_id: str) -> tuple[int, int]:
    with session_scope(factory) as session:
        total = session.scalar(select(func.count(Job.id)).where(Job.suite_id == suite_id)) or 0
        done = session.scalar(select(func.count(Job.id)).where(
            Job.suite_id == suite_id, Job.status.in_(FINISHED_JOB_STATUSES))) or 0
    return int(done), int(total)


def _cancel(factory: sessionmaker[Session], suite_id: str) -> None:
    with session_scope(factory) as session:
        for job in session.scalars(select(Job).where(Job.suite_id == suite_id)):
            repository.request_cancel(session, job.id)
