"""Bearer-token authentication: a token names its team; only sha256 hashes are stored."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from kernelband.auth_tokens import SCOPES, hash_token, hashes_match, scope_allows, token_prefix
from kernelband.db.models import ApiToken, Job, Team, utcnow
from services.api.errors import ApiError
from services.api.timefmt import utc_z

_HOW_TO_GET = "create one with `kernelband tokens create --team NAME`"
_CHALLENGE = {"WWW-Authenticate": "Bearer"}
# Recording use on every request would turn each read into a write; once a minute is enough.
_LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class TeamRef:
    """The authenticated team as plain values: no ORM object outlives the auth session."""

    id: int
    name: str
    scope: str = "admin"  # kernelband.auth_tokens.SCOPES


def _unauthorized(code: str, message: str) -> ApiError:
    return ApiError(401, code, message, headers=_CHALLENGE)


def missing_token() -> ApiError:
    """401 for a request without a bearer token."""
    return _unauthorized(
        "missing_token", f"Send the header 'Authorization: Bearer <token>'; {_HOW_TO_GET}."
    )


def authenticate(session: Session, token: str) -> TeamRef:
    """The team of a valid, unrevoked token, else a 401 ApiError."""
    prefix = token_prefix(token)
    if prefix is not None:
        query = (select(ApiToken, Team.name).join(Team, Team.id == ApiToken.team_id)
                 .where(ApiToken.prefix == prefix))  # one round trip: tokens with their team
        for row, team_name in session.execute(query).all():
            if not hashes_match(token, row.token_hash):
                continue
            _check_live(prefix, row.revoked_at, row.expires_at)
            _touch(session, row.id, row.last_used_at)
            return TeamRef(id=row.team_id, name=team_name, scope=row.scope)
    raise _invalid()


# The read behind every job poll, shared by the job routes (through the ORM) and the 304
# fast path (services/api/fastpoll.py, prepared on its own connections): the token row by the
# sha256 of the whole token (the unique index) with its team, and the job's team and version.
# Built once: constructing the statement costs more CPU than running it on a polled path.
TOKEN_AND_JOB = (
    select(ApiToken.id, ApiToken.team_id, ApiToken.revoked_at, ApiToken.expires_at,
           ApiToken.scope, ApiToken.last_used_at, Team.name, Job.team_id.label("job_team"),
           Job.version)
    .select_from(ApiToken).join(Team, Team.id == ApiToken.team_id)
    .outerjoin(Job, Job.id == bindparam("job_id"))
    .where(ApiToken.token_hash == bindparam("token_hash")))


@dataclass(frozen=True)
class JobAccess:
    """What a live token may know of one job, from a `TOKEN_AND_JOB` row."""

    team: TeamRef
    version: int | None  # None: no such job of this team (another team's looks missing)
    token_id: int
    last_used_at: datetime | None  # the token is due a new one when `needs_touch` says so


def token_and_job_params(token: str, job_id: int) -> dict[str, object]:
    """`TOKEN_AND_JOB`'s parameters."""
    return {"token_hash": hash_token(token), "job_id": job_id}


def job_access(token: str, rows: Sequence[Sequence[Any]]) -> JobAccess:
    """The access `TOKEN_AND_JOB`'s rows for `token` give, else the 401 ApiError (unknown,
    revoked or expired token). The job routes and the fast path both decide here."""
    prefix = token_prefix(token)
    if prefix is None or not rows:
        raise _invalid()
    token_id, team_id, revoked_at, expires_at, scope, last_used_at, team, job_team, version = rows[0]
    _check_live(prefix, revoked_at, expires_at)
    return JobAccess(team=TeamRef(id=team_id, name=team, scope=scope),
                     version=int(version) if job_team == team_id else None,
                     token_id=token_id, last_used_at=last_used_at)


def authenticate_for_job(session: Session, token: str, job_id: int) -> tuple[TeamRef, int | None]:
    """`authenticate`, plus the job's version (None: no such job of this team), in one read.

    The cheap path of a poll: token, team and the job's small columns in one round trip."""
    rows: Sequence[Sequence[Any]] = []
    if token_prefix(token) is not None:
        rows = session.execute(TOKEN_AND_JOB, token_and_job_params(token, job_id)).all()
    access = job_access(token, rows)
    _touch(session, access.token_id, access.last_used_at)
    return access.team, access.version


def _check_live(prefix: str, revoked_at: datetime | None, expires_at: datetime | None) -> None:
    if revoked_at is not None:
        raise _revoked(prefix)
    if expires_at is not None and _aware(expires_at) <= utcnow():
        raise _unauthorized("expired_token", f"Token kb_{prefix}_... expired at "
                            f"{utc_z(_aware(expires_at))}; ask a team admin for a new one "
                            "(POST /v1/tokens) or " + _HOW_TO_GET + ".")


def require_scope(team: TeamRef, needed: str) -> TeamRef:
    """The team, when its token's scope allows `needed`; else 403 naming both scopes."""
    if not scope_allows(team.scope, needed):
        raise ApiError(403, "insufficient_scope", f"This token has scope '{team.scope}'; this "
                       f"request needs '{needed}' ({', '.join(SCOPES)}: each includes the ones "
                       "before it). Use a token with that scope, or ask a team admin for one "
                       "(POST /v1/tokens).")
    return team


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)  # SQLite


def _revoked(prefix: str) -> ApiError:
    return _unauthorized("revoked_token", f"Token kb_{prefix}_... was revoked; {_HOW_TO_GET}.")


def _invalid() -> ApiError:
    return _unauthorized("invalid_token", f"The bearer token is not valid; {_HOW_TO_GET}.")


def needs_touch(last: datetime | None) -> bool:
    """Whether a token last used at `last` is due a new `last_used_at` (once a minute)."""
    now = utcnow()
    if last is not None and last.tzinfo is None:
        last = last.replace(tzinfo=now.tzinfo)  # SQLite returns naive datetimes
    return last is None or now - last > _LAST_USED_RESOLUTION


def _touch(session: Session, token_id: int, last: datetime | None) -> None:
    if needs_touch(last):
        now = utcnow()
        session.execute(update(ApiToken).where(ApiToken.id == token_id)
                        .values(last_used_at=now).execution_options(synchronize_session=False))
        session.commit()
