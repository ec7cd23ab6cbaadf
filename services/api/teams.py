"""Team and token administration (used by `kernelband tokens` and by tests)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.db import repository
from kernelband.db.models import ApiToken, Team, utcnow


@dataclass(frozen=True)
class TokenInfo:
    """A token as listed: never the secret, only its public prefix."""

    prefix: str
    team: str
    name: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


def create_token(session: Session, team_name: str, token_name: str = "") -> str:
    """Mint a token for the team (created if needed); returns the secret, shown once."""
    team = repository.get_or_create_team(session, team_name)
    return repository.create_api_token(session, team.id, token_name)[1]


def revoke_tokens(session: Session, prefix: str) -> int:
    """Revoke the unrevoked tokens with this prefix (`kb_` and a trailing `_` are accepted)."""
    prefix = prefix.removeprefix("kb_").split("_")[0]
    rows = session.scalars(
        select(ApiToken).where(ApiToken.prefix == prefix, ApiToken.revoked_at.is_(None))
    ).all()
    for row in rows:
        row.revoked_at = utcnow()
    session.flush()
    return len(rows)


def list_tokens(session: Session, team_name: str | None = None) -> list[TokenInfo]:
    """Every token (optionally of one team), oldest first."""
    stmt = select(ApiToken, Team).join(Team, Team.id == ApiToken.team_id).order_by(ApiToken.id)
    if team_name:
        stmt = stmt.where(Team.name == team_name)
    return [
        TokenInfo(prefix=t.prefix, team=team.name, name=t.name, created_at=t.created_at,
                  last_used_at=t.last_used_at, revoked_at=t.revoked_at)
        for t, team in session.execute(stmt).all()
    ]
