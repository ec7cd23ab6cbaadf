"""Shared fixtures: settings, a migrated SQLite file per test, and one fresh Postgres database
per test run (created from KERNELBAND_TEST_POSTGRES_URL, dropped at the end)."""

from __future__ import annotations

import os
import shutil
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from kernelband.config import Settings  # noqa: E402
from kernelband.db.models import Base  # noqa: E402
from kernelband.db.session import (  # noqa: E402
    make_engine,
    make_session_factory,
    normalize_url,
    upgrade_database,
)
from kernelband.scheduling import state_cache, view_cache  # noqa: E402
from tests.utils.processes import (  # noqa: E402
    RedisUnavailableError,
    claim_redis_db,
    redis_base_url,
    release_redis_db,
)

DEFAULT_TEST_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


# Under xdist the longest tests start first (the suite campaign alone is a fifth of the serial
# run), so that the run does not end with one of them started late; the rest keep their order.
STARTED_FIRST = ("tests/integration/test_suite_campaign.py",
                 "tests/reliability/test_adversarial_job.py",
                 "tests/reliability/test_scheduler_crashes.py", "tests/integration/",
                 "tests/reliability/", "tests/browser/")

# Files whose tests share more than fixtures: the reliability tests add to one per-process tally
# of injected faults and fuzz requests, which a later test of the same file checks; the bundled
# tests build one wheel from the checkout, and two workers building at once collide in its
# build/ folder.
FILE_GROUPED = ("tests/reliability/", "tests/unit/test_bundled.py")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "alone: asserts on measured times, so `make test` runs it "
                            "after the parallel phase with nothing beside it (another worker's "
                            "load moves the interpreter's CPU-time clock)")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In an xdist worker (`make test`: `-n 2 --dist loadgroup --no-loadscope-reorder`): every
    test gets an id of its own, the tests of a FILE_GROUPED file one group (one worker, in file
    order), and the longest tests start first."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    counts = Counter(item.nodeid for item in items)
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        nodeid = item.nodeid
        if counts[nodeid] > 1:  # schemathesis gives each API operation its test's id
            nodeid = f"{path}::{item.name}"
        if path.startswith(FILE_GROUPED):
            nodeid += f"@{path}"  # the group suffix xdist's loadgroup scheduler reads
        if nodeid != item.nodeid:
            _set_nodeid(item, nodeid)
    items.sort(key=_start_rank)


def _set_nodeid(item: pytest.Item, nodeid: str) -> None:
    """xdist hands tests to workers by id, so a shared id would run once; pytest 9 keeps the
    id as a parsed NodeId (`_id`), earlier releases as a string (`_nodeid`)."""
    current = getattr(item, "_id", None)
    if current is not None and not isinstance(current, str):
        item._id = type(current).parse(nodeid)
    else:
        item._nodeid = nodeid


def _start_rank(item: pytest.Item) -> int:
    path = item.nodeid
    return next((i for i, prefix in enumerate(STARTED_FIRST) if path.startswith(prefix)),
                len(STARTED_FIRST))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Development settings whose data dir (and embedded SQLite file) live in tmp_path."""
    return Settings(data_dir=tmp_path / "data", database_url="", environment="development")


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One SQLite file migrated to head, copied by each test (migrating per test is slow)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "template.sqlite"
    upgrade_database(f"sqlite:///{path}")
    return path


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    """URL of a fresh, migrated SQLite database for this test."""
    path = tmp_path / "kernelband.sqlite"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def sqlite_factory(sqlite_url: str) -> Iterator[sessionmaker[Session]]:
    """Session factory on this test's migrated SQLite database."""
    engine = make_engine(sqlite_url)
    yield make_session_factory(engine)
    engine.dispose()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh, migrated Postgres database for this test run; FAILS (not skips) when down."""
    admin_url = os.environ.get("KERNELBAND_TEST_POSTGRES_URL", DEFAULT_TEST_POSTGRES_URL)
    admin = make_engine(admin_url, isolation_level="AUTOCOMMIT")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")  # one database per xdist worker
    name = f"kb_test_{worker}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # any connection failure: say what to do, do not skip silently
        admin.dispose()
        pytest.fail(
            f"Postgres is unreachable at {admin_url} ({type(exc).__name__}: {exc}). Start "
            "Postgres or set KERNELBAND_TEST_POSTGRES_URL to a server where this user may "
            "CREATE DATABASE.",
            pytrace=False,
        )
    url = make_url(normalize_url(admin_url)).set(database=name).render_as_string(
        hide_password=False
    )
    upgrade_database(url)
    yield url
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def empty_postgres_url(postgres_url: str) -> Iterator[str]:
    """A second, empty database beside the run's (a migration test starts from nothing)."""
    admin = make_engine(postgres_url, isolation_level="AUTOCOMMIT")
    name = f"kb_empty_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield make_url(normalize_url(postgres_url)).set(database=name).render_as_string(
        hide_password=False)
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(params=["postgres", "sqlite"])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of each kind a migration must run on: its test runs once per kind."""
    if request.param == "postgres":
        return str(request.getfixturevalue("empty_postgres_url"))
    return f"sqlite:///{tmp_path / 'kb.sqlite'}"


@pytest.fixture(scope="session")
def postgres_engine(postgres_url: str) -> Iterator[Engine]:
    """One engine on the test run's Postgres database."""
    engine = make_engine(postgres_url)
    yield engine
    engine.dispose()


@pytest.fixture
def postgres_factory(postgres_engine: Engine) -> sessionmaker[Session]:
    """Session factory on the run's Postgres database, emptied before this test.

    The engine is shared by the run, so the scheduler's per-engine caches of what it committed
    (parsed policy states, view rows) are emptied with the tables: ids restart, and a row
    remembered from an earlier test would look written already."""
    tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    with postgres_engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    state_cache.clear_cache()
    view_cache.clear_cache()
    return make_session_factory(postgres_engine)


@pytest.fixture(params=["sqlite", "postgres"])
def db_factory(request: pytest.FixtureRequest) -> sessionmaker[Session]:
    """The same test on SQLite and on Postgres (real databases, no mocks)."""
    name = "sqlite_factory" if request.param == "sqlite" else "postgres_factory"
    return request.getfixturevalue(name)  # type: ignore[no-any-return]


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A Redis database of this test's own (claimed, emptied after): tests running side by side
    never see each other's queues. Skips only when no Redis server answers at all."""
    try:
        db = claim_redis_db()
    except RedisUnavailableError as exc:
        if isinstance(exc.__cause__, redis.exceptions.ConnectionError):
            pytest.skip(str(exc))
        raise
    yield f"{redis_base_url()}/{db}"
    release_redis_db(db)
