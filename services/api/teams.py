"""Team and token administration (used by `kernelband tokens` and by tests)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.auth_tokens import hash_token, token_prefix
from kernelband.db import repository, session_scope
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


def register_bootstrap_token(factory: sessionmaker[Session], token: str, team: str) -> bool:
    """Store KERNELBAND_BOOTSTRAP_TOKEN for `team` once; True if it was added now."""
    prefix = token_prefix(token)
    if prefix is None:
        raise ValueError(
            "KERNELBAND_BOOTSTRAP_TOKEN is not a KernelBand token (kb_<8 hex>_<secret>); "
            "mint one with `kernelband tokens create --team NAME` or unset it"
        )
    digest = hash_token(token)
    with session_scope(factory) as session:
        if session.query(ApiToken).filter_by(token_hash=digest).first() is not None:
            return False
        owner = repository.get_or_create_team(session, team)
        session.add(ApiToken(team_id=owner.id, name="bootstrap", prefix=prefix, token_hash=digest,
                             scope="admin"))
    return True
