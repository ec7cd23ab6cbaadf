"""A team's API tokens over REST: an admin token lists, creates and revokes them."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Path, status
from pydantic import BaseModel, ConfigDict, Field

from kernelband.db import session_scope
from kernelband.db.models import utcnow
from services.api.deps import AdminTeam, DbDep
from services.api.errors import ERROR_RESPONSES, ApiError, ErrorBody
from services.api.teams import TokenInfo, bare_prefix, create_team_token, list_tokens, revoke_tokens
from services.api.timefmt import UtcTime

router = APIRouter(prefix="/v1/tokens", tags=["tokens"], responses={
    **ERROR_RESPONSES, 403: {"model": ErrorBody, "description": "The token is not an admin token."}})

Scope = Literal["read", "submit", "admin"]


class TokenCreate(BaseModel):
    """POST /v1/tokens body."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(default="", max_length=120, description="A label, e.g. 'wall dashboard'.")
    scope: Scope = Field(default="read", description=(
        "read: every GET (dashboards); submit: also jobs, suites, cancel and skill settings; "
        "admin: also the team's tokens and webhooks."))
    expires_in_s: int | None = Field(default=None, ge=60, le=5 * 365 * 86400, description=(
        "Seconds until the token stops working (401 expired_token); null: never."))


class TokenOut(BaseModel):
    """A token as listed: its public prefix, never the secret."""

    prefix: str = Field(description="kb_<8 hex>: names the token in lists and DELETE.")
    name: str
    scope: Scope
    state: Literal["active", "revoked", "expired"]
    created_at: UtcTime
    expires_at: UtcTime | None = None
    last_used_at: UtcTime | None = None
    revoked_at: UtcTime | None = None


class TokenCreated(TokenOut):
    """A new token: `token` is shown this once (only its hash is stored)."""

    token: str = Field(description="Send as 'Authorization: Bearer <token>'. Store it now.")


class TokenList(BaseModel):
    """GET /v1/tokens."""

    tokens: list[TokenOut]


def _out(info: TokenInfo) -> TokenOut:
    return TokenOut(prefix=f"kb_{info.prefix}", name=info.name, scope=info.scope,  # type: ignore[arg-type]
                    state=info.state, created_at=info.created_at, expires_at=info.expires_at,  # type: ignore[arg-type]
                    last_used_at=info.last_used_at, revoked_at=info.revoked_at)


@router.get("", summary="List your team's tokens (admin)")
def list_team_tokens(team: AdminTeam, db: DbDep) -> TokenList:
    with session_scope(db) as session:
        return TokenList(tokens=[_out(t) for t in list_tokens(session, team_id=team.id)])


@router.post("", status_code=status.HTTP_201_CREATED, summary="Create a token for your team (admin)")
def create_team_token_route(body: TokenCreate, team: AdminTeam, db: DbDep) -> TokenCreated:
    expires = utcnow() + timedelta(seconds=body.expires_in_s) if body.expires_in_s else None
    with session_scope(db) as session:
        row, secret = create_team_token(session, team.id, body.name, scope=body.scope,
                                        expires_at=expires)
        session.commit()
        info = TokenInfo(prefix=row.prefix, team=team.name, name=row.name,
                         created_at=row.created_at, last_used_at=None, revoked_at=None,
                         scope=row.scope, expires_at=row.expires_at)
    return TokenCreated(**_out(info).model_dump(), token=secret)


@router.delete("/{prefix}", summary="Revoke one of your team's tokens (admin)")
def revoke_team_token(
    prefix: Annotated[str, Path(pattern=r"^(kb_)?[0-9a-fA-F]{8}$",
                                description="The token's prefix, kb_<8 hex>, from GET /v1/tokens.")],
    team: AdminTeam, db: DbDep,
) -> TokenList:
    with session_scope(db) as session:
        revoked = revoke_tokens(session, bare_prefix(prefix), team_id=team.id)
        if not revoked:
            raise ApiError(404, "not_found", f"Your team has no active token {prefix}; list "
                           "them with GET /v1/tokens.")
        session.commit()
        infos = [t for t in list_tokens(session, team_id=team.id) if f"kb_{t.prefix}" in revoked]
    return TokenList(tokens=[_out(t) for t in infos])
