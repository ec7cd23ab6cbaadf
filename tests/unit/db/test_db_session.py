"""Session scope, error translation, schema check and repository functions on real databases."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import repository
from kernelband.db.models import Job, Team
from kernelband.db.session import (
    ConflictError,
    DatabaseUnavailableError,
    SchemaVersionError,
    check_schema_version,
    make_engine,
    normalize_url,
    open_database,
    session_scope,
)


def test_session_scope_commits_and_translates_conflicts(db_factory: sessionmaker[Session]) -> None:
    with session_scope(db_factory) as session:
        repository.create_team(session, "alpha")
    with pytest.raises(ConflictError, match="conflicting write"), \
            session_scope(db_factory) as session:
        repository.create_team(session, "alpha")
    with session_scope(db_factory) as session:
        assert repository.get_or_create_team(session, "alpha").id == 1


def test_session_scope_rolls_back_on_error(db_factory: sessionmaker[Session]) -> None:
    with pytest.raises(RuntimeError), session_scope(db_factory) as session:
        repository.create_team(session, "beta")
        raise RuntimeError("caller failed")
    with session_scope(db_factory) as session:
        assert session.scalars(select(Team).where(Team.name == "beta")).first() is None


def test_unreachable_database_says_what_to_check() -> None:
    engine = make_engine("postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(DatabaseUnavailableError, match="KERNELBAND_DATABASE_URL"):
        check_schema_version(engine)


def test_unmigrated_sqlite_fails_fast_and_migrate_fixes_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.sqlite'}"
    with pytest.raises(SchemaVersionError, match="make migrate"):
        open_database(url)
    engine, _factory = open_database(url, migrate=True)
    engine.dispose()


def test_bare_postgres_url_uses_psycopg2() -> None:
    assert normalize_url("postgresql://u@h/db") == "postgresql+psycopg2://u@h/db"
    assert normalize_url("sqlite:///x") == "sqlite:///x"


def test_tokens_problems_jobs_and_cancel(db_factory: sessionmaker[Session]) -> None:
    with session_scope(db_factory) as session:
        team = repository.create_team(session, "gamma")
        token, plaintext = repository.create_api_token(session, team.id, "ci")
        assert token.token_hash != plaintext and plaintext.startswith(f"kb_{token.prefix}_")
        assert repository.find_token(session, plaintext) is not None
        first = repository.get_or_create_problem(session, team.id, "p", "native", "src", {}, "a")
        again = repository.get_or_create_problem(session, team.id, "p", "native", "src", {}, "a")
        assert first.id == again.id
        with pytest.raises(ValueError, match="choose from"):
            repository.create_job(session, team.id, first.id, ["v100"])
        job = repository.create_job(session, team.id, first.id, ["cpu"], budget_iterations=3)
        repository.request_cancel(session, job.id)
        assert session.get_one(Job, job.id).cancel_requested is True
        with pytest.raises(repository.NotFoundError, match="not found"):
            repository.get_job(session, job.id, team_id=team.id + 1)
