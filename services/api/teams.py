"""Team and token administration (used by `kernelband tokens` and by tests)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.auth_tokens import SCOPES, TOKEN_PREFIX, hash_token, mint_token, token_prefix
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
    scope: str = "admin"
    expires_at: datetime | None = None

    @property
    def state(self) -> str:
        """active | revoked | expired."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and _aware(self.expires_at) <= utcnow():
            return "expired"
        return "active"


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)  # SQLite


def create_token(session: Session, team_name: str, token_name: str = "", *,
                 scope: str = "admin", expires_at: datetime | None = None) -> str:
    """Mint a token for the team (created if needed); returns the secret, shown once."""
    team = repository.get_or_create_team(session, team_name)
    return create_team_token(session, team.id, token_name, scope=scope, expires_at=expires_at)[1]


def create_team_token(session: Session, team_id: int, name: str = "", *, scope: str = "admin",
                      expires_at: datetime | None = None) -> tuple[ApiToken, str]:
    """A new token row of the team and its secret (shown once; only the hash is stored)."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}; got '{scope}'")
    new = mint_token()
    row = ApiToken(team_id=team_id, name=name, prefix=new.prefix, token_hash=new.sha256,
                   is_admin=scope == "admin", scope=scope, expires_at=expires_at)
    session.add(row)
    session.flush()
    return row, new.secret


def bare_prefix(prefix: str) -> str:
    """`kb_1a2b3c4d`, `kb_1a2b3c4d_...` or `1a2b` -> the hex part as typed (`1a2b3c4d`, `1a2b`)."""
    return prefix.strip().removeprefix(TOKEN_PREFIX).split("_")[0].lower()


def revoke_tokens(session: Session, prefix: str, team_id: int | None = None) -> list[str]:
    """Revoke every unrevoked token whose prefix starts with `prefix` (`kb_` and a trailing
    `_...` are accepted; an empty prefix matches nothing); returns the revoked prefixes."""
    start = bare_prefix(prefix)
    if not start:
        return []
    stmt = select(ApiToken).where(ApiToken.prefix.startswith(start, autoescape=True),
                                  ApiToken.revoked_at.is_(None))
    if team_id is not None:
        stmt = stmt.where(ApiToken.team_id == team_id)
    rows = session.scalars(stmt.order_by(ApiToken.id)).all()
    for row in rows:
        row.revoked_at = utcnow()
    session.flush()
    return [f"{TOKEN_PREFIX}{row.prefix}" for row in rows]


def list_tokens(session: Session, team_name: str | None = None,
                team_id: int | None = None) -> list[TokenInfo]:
    """Every token (optionally of one team, by name or id), oldest first."""
    stmt = select(ApiToken, Team).join(Team, Team.id == ApiToken.team_id).order_by(ApiToken.id)
    if team_name:
        stmt = stmt.where(Team.name == team_name)
    if team_id is not None:
        stmt = stmt.where(Team.id == team_id)
    return [
        TokenInfo(prefix=t.prefix, team=team.name, name=t.name, created_at=t.created_at,
                  last_used_at=t.last_used_at, revoked_at=t.revoked_at, scope=t.scope,
                  expires_at=t.expires_at)
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
