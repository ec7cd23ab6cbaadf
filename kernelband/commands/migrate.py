"""`kernelband migrate`: upgrade the configured database to this code's schema revision."""

from __future__ import annotations

from typing import Annotated

import typer
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from kernelband.config import get_settings
from kernelband.db.session import (
    DatabaseError,
    current_revision,
    head_revision,
    make_engine,
    upgrade_database,
)


def migrate(
    database_url: Annotated[str, typer.Option(
        help="Database to upgrade (default: KERNELBAND_DATABASE_URL, else the embedded SQLite file).",
    )] = "",
) -> None:
    """Run the bundled Alembic migrations up to head; safe to run again."""
    url = database_url or get_settings().effective_database_url
    shown = make_url(url).render_as_string(hide_password=True)
    try:
        upgrade_database(url)
        engine = make_engine(url)
        try:
            found = current_revision(engine)
        finally:
            engine.dispose()
    except (DatabaseError, SQLAlchemyError) as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip()
        typer.echo(f"cannot migrate {shown}: {reason}; check KERNELBAND_DATABASE_URL and that the "
                   "server runs", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"{shown} is at revision {found} (head {head_revision()})")


def register(app: typer.Typer) -> None:
    app.command("migrate")(migrate)
