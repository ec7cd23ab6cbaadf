"""Reliability fixtures: the integration fixtures (real Postgres, Redis, Celery), imported not
copied, plus a per-run tally of injected faults printed at the end of the run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from tests.integration.conftest import (  # noqa: F401  (fixtures re-exported for this directory)
    broker_url,
    dispatcher_settings,
    factory,
    h100_worker,
    integration_engine,
    loaded_examples,
    log_dir,
    make_job,
    scheduler_env,
    schedulers,
    worker_env,
    workers,
)

TALLY: Counter[str] = Counter()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in this directory carries the `reliability` marker."""
    for item in items:
        if "tests/reliability/" in str(item.fspath):
            item.add_marker(pytest.mark.reliability)


@pytest.fixture(scope="session")
def tally() -> Iterator[Counter[str]]:
    """Faults injected, jobs completed, rewards lost/duplicated, fuzz requests: printed at the end."""
    yield TALLY
    print("\nRELIABILITY TALLY " + ", ".join(f"{k}={v}" for k, v in sorted(TALLY.items())))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TALLY:
        terminalreporter.write_line(
            "reliability tally: " + ", ".join(f"{k}={v}" for k, v in sorted(TALLY.items())))
