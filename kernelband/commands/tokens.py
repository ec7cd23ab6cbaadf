"""`kernelband tokens create | revoke | list`: team API tokens (only hashes are stored)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from sqlalchemy.orm import Session, sessionmaker

from kernelband.auth_tokens import SCOPES
from kernelband.config import get_settings
from kernelband.db import open_database, session_scope
from kernelband.db.models import utcnow
from services.api.teams import create_token, list_tokens, revoke_tokens

tokens_app = typer.Typer(no_args_is_help=True, help="Create, revoke and list team API tokens.")


def configured_database() -> sessionmaker[Session]:
    """The configured database (SQLite is migrated on first use, as in embedded mode)."""
    url = get_settings().effective_database_url
    return open_database(url, migrate=url.startswith("sqlite"))[1]


@tokens_app.command("create")
def create(
    team: Annotated[str, typer.Option(help="Team name (created if new).")],
    name: Annotated[str, typer.Option(help="A label for this token.")] = "",
    scope: Annotated[str, typer.Option(
        help="read (every GET: dashboards), submit (also jobs, suites, cancel) or admin (also "
             "the team's tokens and webhooks over REST).")] = "admin",
    expires_days: Annotated[float | None, typer.Option(
        min=0.001, help="Days until the token stops working (default: never).")] = None,
) -> None:
    """Mint a token for a team and print it once; it cannot be shown again."""
    if not team.strip():
        typer.echo("--team must name a team, e.g. --team research.", err=True)
        raise typer.Exit(2)
    if scope not in SCOPES:
        typer.echo(f"--scope must be one of {', '.join(SCOPES)}; got '{scope}'.", err=True)
        raise typer.Exit(2)
    expires = utcnow() + timedelta(days=expires_days) if expires_days else None
    with session_scope(configured_database()) as session:
        secret = create_token(session, team.strip(), name, scope=scope, expires_at=expires)
    typer.echo(secret)
    until = f", expires {expires:%Y-%m-%d %H:%M} UTC" if expires else ""
    typer.echo(f"Token for team '{team}' (scope {scope}{until}). Store it now: only its hash is "
               "kept. Use it as 'Authorization: Bearer <token>'.", err=True)


@tokens_app.command("revoke")
def revoke(prefix: Annotated[str, typer.Argument(
        help="Token prefix, e.g. kb_1a2b3c4d; a shorter start (kb_1a) revokes every active "
             "token whose prefix starts with it.")]) -> None:
    """Revoke every active token with this prefix (or whose prefix starts with it)."""
    with session_scope(configured_database()) as session:
        revoked = revoke_tokens(session, prefix)
    if not revoked:
        typer.echo(f"No active token has a prefix starting with '{prefix}'; see "
                   "`kernelband tokens list`.", err=True)
        raise typer.Exit(1)
    typer.echo(f"Revoked {len(revoked)} token(s): {', '.join(revoked)}.")


@tokens_app.command("list")
def list_(team: Annotated[str | None, typer.Option(help="Only this team.")] = None) -> None:
    """List tokens by prefix, team, scope and state (never the secret)."""
    with session_scope(configured_database()) as session:
        infos = list_tokens(session, team)
    table = Table("prefix", "team", "name", "scope", "created", "expires", "last used", "state")
    for t in infos:
        table.add_row(f"kb_{t.prefix}", t.team, t.name, t.scope, f"{t.created_at:%Y-%m-%d %H:%M}",
                      f"{t.expires_at:%Y-%m-%d %H:%M}" if t.expires_at else "never",
                      f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "-", t.state)
    console = Console()
    Console(width=max(console.width, 130)).print(table)  # prefixes must never be cut


def register(app: typer.Typer) -> None:
    """Add the `tokens` group to the CLI."""
    app.add_typer(tokens_app, name="tokens")
