"""Alembic environment: the URL comes from the caller's config or from Settings."""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

from kernelband.config import Settings
from kernelband.db.models import Base
from kernelband.db.session import normalize_url

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    # An explicit URL (tests, upgrade_database) wins; otherwise the one Settings object decides.
    url = config.get_main_option("sqlalchemy.url")
    return normalize_url(url or Settings().effective_database_url)


def run_migrations_offline() -> None:
    """Emit SQL without a connection (`alembic upgrade head --sql`)."""
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True,
                      render_as_batch=True, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run migrations on a live connection."""
    section = config.get_section(config.config_ini_section, {})
    section["sqlalchemy.url"] = _url()
    if section["sqlalchemy.url"].startswith("sqlite:///"):
        from pathlib import Path

        Path(section["sqlalchemy.url"].removeprefix("sqlite:///")).parent.mkdir(
            parents=True, exist_ok=True
        )
    connectable = engine_from_config(section, prefix="sqlalchemy.", poolclass=pool.NullPool)
    with connectable.connect() as connection:
        # Batch mode lets later revisions alter columns on SQLite too.
        context.configure(connection=connection, target_metadata=target_metadata,
                          render_as_batch=True, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
