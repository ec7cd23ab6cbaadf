"""Real Postgres + Redis + Celery worker processes for the distributed-runtime tests.

URLs: KERNELBAND_TEST_POSTGRES_URL (see tests/conftest.py) and KERNELBAND_TEST_REDIS_URL
(server only; this run claims an empty database number on it). Unreachable servers fail the
tests with what to do, they never skip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db import repository
from kernelband.db.models import Base
from kernelband.db.session import make_engine, make_session_factory, session_scope
from kernelband.problem.model import KernelProblem
from kernelband.sandbox.problems import load_problem_sandboxed
from services.scheduler.dispatcher import RESULTS_UNACKED_KEYS
from services.worker.queues import RESULTS_QUEUE, TASK_QUEUES
from tests.utils.processes import (
    ManagedProcess,
    RedisUnavailableError,
    claim_redis_db,
    redis_base_url,
    release_redis_db,
    service_env,
    start_scheduler,
    start_worker,
)

# Workers get a database URL on purpose: they must drop it and never use it.
POISON_DATABASE_URL = "postgresql://workers-must-not-read-this@127.0.0.1:9/none"
FAST_SCHEDULER = {"KERNELBAND_POLL_INTERVAL_S": "0.1", "KERNELBAND_LEASE_S": "120"}
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
JobMaker = Callable[..., int]


@pytest.fixture(scope="session")
def broker_url() -> Iterator[str]:
    """A Redis database claimed for this run, emptied at the end."""
    try:
        db = claim_redis_db()
    except RedisUnavailableError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield f"{redis_base_url()}/{db}"
    release_redis_db(db)


@pytest.fixture(scope="session")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("service-logs")


@pytest.fixture(scope="session")
def worker_env(broker_url: str) -> dict[str, str]:
    return service_env(POISON_DATABASE_URL, broker_url, broker_url,
                       KERNELBAND_HEARTBEAT_INTERVAL_S="2")


@pytest.fixture(scope="session")
def workers(worker_env: dict[str, str], log_dir: Path) -> Iterator[list[ManagedProcess]]:
    """One llm worker and one cpu worker for the whole run (they hold no state)."""
    started = [start_worker("worker-llm", "llm", worker_env, log_dir),
               start_worker("worker-cpu", "cpu", worker_env, log_dir, concurrency=2)]
    yield started
    for process in started:
        process.terminate()


@pytest.fixture(scope="session")
def h100_worker(worker_env: dict[str, str], log_dir: Path) -> Iterator[ManagedProcess]:
    """A gpu.h100 worker on this CPU machine (it returns labelled estimates for sm_90)."""
    process = start_worker("worker-h100", "gpu.h100", worker_env, log_dir)
    yield process
    process.terminate()


@pytest.fixture(scope="session")
def integration_engine(postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_url)
    yield engine
    engine.dispose()


@pytest.fixture
def factory(integration_engine: Engine, broker_url: str) -> sessionmaker[Session]:
    """Empty tables and queues before each test.

    Identities are NOT restarted: a late result from an earlier test then names an unknown
    attempt id and is ignored, instead of landing on a new attempt with a reused id.
    """
    tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    with integration_engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {tables} CASCADE"))
    client = redis.Redis.from_url(broker_url)
    client.delete(RESULTS_QUEUE, *TASK_QUEUES, *RESULTS_UNACKED_KEYS.values())
    client.close()
    return make_session_factory(integration_engine)


@pytest.fixture
def scheduler_env(postgres_url: str, broker_url: str) -> dict[str, str]:
    return service_env(postgres_url, broker_url, broker_url, **FAST_SCHEDULER)


@pytest.fixture
def schedulers(scheduler_env: dict[str, str], log_dir: Path,
               request: pytest.FixtureRequest) -> Iterator[Callable[[str], ManagedProcess]]:
    """Start named scheduler processes; all are stopped when the test ends."""
    started: list[ManagedProcess] = []

    def start(name: str) -> ManagedProcess:
        process = start_scheduler(f"{request.node.name[:40]}-{name}", scheduler_env, log_dir)
        started.append(process)
        return process

    yield start
    for process in started:
        process.terminate()


@pytest.fixture
def dispatcher_settings(broker_url: str) -> Settings:
    return Settings(broker_url=broker_url, result_backend_url=broker_url)


@pytest.fixture(scope="session")
def loaded_examples() -> dict[str, KernelProblem]:
    """Examples loaded once per run through the sandboxed loader, as the API does."""
    return {}


@pytest.fixture
def make_job(factory: sessionmaker[Session],
             loaded_examples: dict[str, KernelProblem]) -> JobMaker:
    """Create a queued job through the repository functions; returns its id."""

    def make(example: str = "vector_add", targets: tuple[str, ...] = ("cpu",), **options: Any) -> int:
        if example not in loaded_examples:
            source = (EXAMPLES / f"{example}.py").read_text()
            loaded_examples[example] = load_problem_sandboxed(source, "native", example)
        problem = loaded_examples[example]
        options = {"budget_iterations": 4, "parallelism": 2, "seed": 7, **options}
        with session_scope(factory) as session:
            team = repository.get_or_create_team(session, "integration")
            row = repository.get_or_create_problem(session, team.id, problem.name, problem.format,
                                                   problem.source, problem.to_dict(),
                                                   problem.content_hash)
            return repository.create_job(session, team.id, row.id, list(targets), **options).id

    return make
