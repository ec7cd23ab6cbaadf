"""A suite campaign on the real services: Postgres, Redis, Celery workers, a scheduler process.

Three suites (native, TritonBench-G, KernelBench examples), two policies, the rules generator,
the cpu target, budget 1. The scheduler is killed with SIGKILL once mid-campaign and restarted;
every job must still complete and no job completed before the kill may change its outcome.
By default every bundled example runs (7 native, 5 TritonBench-G, 5 KernelBench: 34 jobs);
KERNELBAND_SUITE_QUICK=1 takes the first three files of each format. One pull per job is what
the kill needs (jobs finished, in flight and queued when it comes); alone on a 2-core machine
the campaign took 160 s at budget 1 against 261 s at budget 2, and it is the longest test of
`make test`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import repository
from kernelband.db.models import FINISHED_JOB_STATUSES, Job
from kernelband.db.session import session_scope
from kernelband.sandbox.problems import load_problem_sandboxed
from kernelband.suite import SuiteSettings, create_suite, load_sources, read_directory, suite_report
from kernelband.suite.export import metrics_csv
from tests.utils.processes import ManagedProcess, wait_for

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FORMATS = {"native": EXAMPLES, "tritonbench": EXAMPLES / "tritonbench",
           "kernelbench": EXAMPLES / "kernelbench"}
SETTINGS = SuiteSettings(targets=("cpu",), policies=("kernelband", "random"), budget=1,
                         parallelism=2, seed=3)


def _create_suites(factory: sessionmaker[Session]) -> dict[str, str]:
    full = os.environ.get("KERNELBAND_SUITE_QUICK") != "1"
    suites: dict[str, str] = {}
    for format, directory in FORMATS.items():
        sources = read_directory(directory)[: None if full else 3]
        problems, failures = load_sources(sources, format, load_problem_sandboxed)
        assert not failures, f"bundled {format} examples must load: {failures}"
        with session_scope(factory) as session:
            team = repository.get_or_create_team(session, "suite-team")
            suites[format] = create_suite(session, team.id, f"examples-{format}", format,
                                          problems, failures, SETTINGS).id
    return suites


def _jobs(factory: sessionmaker[Session]) -> dict[int, str]:
    with session_scope(factory) as session:
        return {j.id: j.status for j in session.scalars(select(Job))}


def _completed(factory: sessionmaker[Session]) -> set[int]:
    return {job_id for job_id, status in _jobs(factory).items() if status == "completed"}


def _all_finished(factory: sessionmaker[Session]) -> bool:
    return all(status in FINISHED_JOB_STATUSES for status in _jobs(factory).values())


# The run's 600 s per test is less than this test's own waits (480 s, then 600 s): on a 2-core
# machine whose Python ran 2.5 to 4 times slower than where those waits were set, beside the rest
# of the suite, it was cut at 600 s with jobs still finishing (229 s when run alone).
@pytest.mark.timeout(1200)
def test_suite_campaign_survives_a_scheduler_kill(
    factory: sessionmaker[Session], workers: list[ManagedProcess],
    schedulers: Callable[[str], ManagedProcess],
) -> None:
    started = time.monotonic()
    suites = _create_suites(factory)
    total = len(_jobs(factory))
    first = schedulers("first")
    # Jobs share the workers fairly, so they finish late and together: on a slow 2-core
    # machine the first quarter took over 240 s in a full-suite run (186 s for the whole
    # campaign when run alone). The waits end as soon as their condition holds.
    wait_for(lambda: len(_completed(factory)) >= max(1, total // 4), 480,
             "a quarter of the suite jobs to complete", processes=(first, *workers))
    first.kill9()
    done_before_kill = _completed(factory)
    with session_scope(factory) as session:
        before = {i: suite_report(session, s).problems for i, s in suites.items()}
    second = schedulers("second")
    wait_for(lambda: _all_finished(factory), 600, "every suite job to finish",
             interval_s=1.0, processes=(second, *workers))
    assert _completed(factory) == set(_jobs(factory)), "every job completes after the restart"
    assert done_before_kill <= _completed(factory)

    with session_scope(factory) as session:
        for format, suite_id in suites.items():
            report = suite_report(session, suite_id)
            assert report.finished and not report.load_failures
            print(f"\n{format} suite metrics:\n{metrics_csv(report)}")
            assert {m.policy for m in report.metrics} == {"kernelband", "random"}
            for metric in report.metrics:
                assert metric.problems == len(report.problems) // 2
                assert metric.label in ("estimated", "none")  # cpu target: cost-model estimates
            # Jobs finished before the kill keep exactly their results.
            earlier = {(p.job_id, p.target): p for p in before[format]}
            for row in report.problems:
                if row.job_id in done_before_kill:
                    assert earlier[(row.job_id, row.target)] == row
    print(f"\nsuite campaign: {total} jobs, wall {time.monotonic() - started:.1f}s")
