"""Engine, session scope with error translation, migrations and the fail-fast schema check."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.exc import StaleDataError

from kernelband.bundled import migrations_dir
from kernelband.db import json_codec

# Connection pool per engine (Postgres). Holders release connections within one call, so the
# pool only needs to match the API's worker threads (deps.API_WORKER_THREADS = size + overflow -
# reserve). A short timeout turns exhaustion into a quick 503 instead of a 30 s hang.
POOL_SIZE = 10
POOL_MAX_OVERFLOW = 15
POOL_RESERVE = 5  # connections beyond the API's threads: embedded scheduler, metrics scrapes
POOL_TIMEOUT_S = 5.0


class DatabaseError(RuntimeError):
    """Base of the database errors the service shows to people."""


class ConflictError(DatabaseError):
    """A write broke a uniqueness or foreign-key rule, or lost a race to another writer."""


class DatabaseUnavailableError(DatabaseError):
    """The database could not be reached."""


class SchemaVersionError(DatabaseError):
    """The database schema is not at the revision this code expects."""


def normalize_url(url: str) -> str:
    """Map a bare `postgresql://` URL to the psycopg2 driver that the project installs."""
    # SQLAlchemy 2.1 defaults `postgresql://` to psycopg 3, which is not a dependency.
    for bare in ("postgresql://", "postgres://"):
        if url.startswith(bare):
            return "postgresql+psycopg2://" + url.removeprefix(bare)
    return url


def make_engine(url: str, **kwargs: object) -> Engine:
    """Create an engine; SQLite gets foreign keys, WAL and a busy timeout for threads. JSON
    columns are encoded and decoded by `json_codec` (orjson) unless the caller names others."""
    url = normalize_url(url)
    kwargs = {"json_serializer": json_codec.dumps, "json_deserializer": json_codec.loads,
              **kwargs}
    if url.startswith("sqlite"):
        if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, **kwargs
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    pool: dict[str, object] = {"pool_pre_ping": True}
    if "poolclass" not in kwargs:  # sizes apply to the default QueuePool only
        pool |= {"pool_size": POOL_SIZE, "max_overflow": POOL_MAX_OVERFLOW,
                 "pool_timeout": POOL_TIMEOUT_S}
    pool |= {"executemany_mode": "values_plus_batch"}
    return create_engine(url, **{**pool, **kwargs})


def _sqlite_pragmas(dbapi_connection: object, _record: object) -> None:
    cursor = dbapi_connection.cursor()  # type: ignore[attr-defined]
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """A session factory whose objects stay readable after commit."""
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One transaction: commit on success, roll back on error, translate database errors."""
    session = factory()
    try:
        yield session
        session.commit()
    except IntegrityError as exc:
        session.rollback()
        raise ConflictError(f"conflicting write: {exc.orig}") from exc
    except StaleDataError as exc:
        session.rollback()
        raise ConflictError(f"row changed by another writer, retry: {exc}") from exc
    except OperationalError as exc:
        session.rollback()
        raise DatabaseUnavailableError(
            f"database error: {exc.orig}; check KERNELBAND_DATABASE_URL and that the server runs"
        ) from exc
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def _alembic_config(url: str) -> object:
    from alembic.config import Config

    config = Config()  # no alembic.ini needed: an installed wheel has none
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("path_separator", "os")
    config.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return config


def head_revision() -> str:
    """The newest migration revision shipped with this code."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_alembic_config("sqlite://")).get_current_head()  # type: ignore[arg-type]
    if head is None:
        raise SchemaVersionError("no migrations found in the installed kernelband package")
    return head


def upgrade_database(url: str, revision: str = "head") -> None:
    """Run the Alembic migrations up to `revision` (embedded mode does this at start)."""
    from alembic import command

    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(_alembic_config(url), revision)  # type: ignore[arg-type]


def downgrade_database(url: str, revision: str = "base") -> None:
    """Run the Alembic migrations down to `revision`."""
    from alembic import command

    command.downgrade(_alembic_config(url), revision)  # type: ignore[arg-type]


def current_revision(engine: Engine) -> str | None:
    """The revision recorded in the database, or None for an empty database."""
    try:
        if not inspect(engine).has_table("alembic_version"):
            return None
        with engine.connect() as conn:
            row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    except OperationalError as exc:
        raise DatabaseUnavailableError(
            f"cannot reach the database: {exc.orig}; check KERNELBAND_DATABASE_URL"
        ) from exc
    return None if row is None else str(row[0])


def check_schema_version(engine: Engine) -> None:
    """Fail fast when the database is not migrated to this code's head revision."""
    found, expected = current_revision(engine), head_revision()
    if found != expected:
        raise SchemaVersionError(
            f"database schema is at revision {found or 'none'} but this code needs {expected}; "
            "run `kernelband migrate` (or `make migrate` in a checkout) against KERNELBAND_DATABASE_URL"
        )


def open_database(url: str, *, migrate: bool = False) -> tuple[Engine, sessionmaker[Session]]:
    """Engine + session factory after the schema check; `migrate` upgrades first (embedded)."""
    if migrate:
        upgrade_database(url)
    engine = make_engine(url)
    check_schema_version(engine)
    return engine, make_session_factory(engine)
