"""FastAPI dependencies as `Annotated` aliases, so route signatures read like sentences.

No dependency holds a database connection past its own call: authentication runs in a short
session of its own and returns plain values, and each endpoint opens its own short session with
`session_scope(db)`. A connection held while its request waits for another worker-thread hop
deadlocks the server under load (threads wait for connections, connection holders for threads).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db import session_scope
from kernelband.db.session import POOL_MAX_OVERFLOW, POOL_RESERVE, POOL_SIZE
from services.api.auth import TeamRef, authenticate, missing_token, require_scope
from services.api.ids import JobId as JobId
from services.api.problems import ProblemLoader

_bearer = HTTPBearer(auto_error=False, description="A team token from `kernelband tokens create`.")

# Worker threads for sync routes and dependencies: at most one connection each, so with this
# many threads a request never waits for a pooled connection (the reserve serves the embedded
# scheduler and metrics scrapes).
API_WORKER_THREADS = POOL_SIZE + POOL_MAX_OVERFLOW - POOL_RESERVE


# The plain getters are async on purpose: a sync dependency costs a worker-thread hop.
async def get_settings(request: Request) -> Settings:
    """The Settings the app was created with."""
    settings: Settings = request.app.state.settings
    return settings


async def get_session_factory(request: Request) -> sessionmaker[Session]:
    """The app's session factory; endpoints open `with session_scope(db) as session:`."""
    factory: sessionmaker[Session] = request.app.state.session_factory
    return factory


async def get_problem_loader(request: Request) -> ProblemLoader:
    """The loader that validates submitted problems (the sandboxed one unless a test swaps it)."""
    loader: ProblemLoader = request.app.state.problem_loader
    return loader


# Offsets and sequence numbers are 32-bit integers on Postgres; larger is a typo: 422.
MAX_ID = 2**31 - 1
EVENTS_LIMIT_DEFAULT, EVENTS_LIMIT_MAX = 100, 1000  # GET /v1/jobs/{id}/events?limit=

SettingsDep = Annotated[Settings, Depends(get_settings)]
DbDep = Annotated[sessionmaker[Session], Depends(get_session_factory)]
ProblemLoaderDep = Annotated[ProblemLoader, Depends(get_problem_loader)]


def get_current_team(
    db: DbDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> TeamRef:
    """The team whose bearer token came with the request, looked up in a session of its own
    that is closed (its connection back in the pool) before the endpoint runs."""
    if credentials is None:
        raise missing_token()
    with session_scope(db) as session:
        return authenticate(session, credentials.credentials)


CurrentTeam = Annotated[TeamRef, Depends(get_current_team)]  # any scope: reads


async def get_submitting_team(team: CurrentTeam) -> TeamRef:
    """The team, when its token may submit and cancel (scope submit or admin)."""
    return require_scope(team, "submit")


async def get_admin_team(team: CurrentTeam) -> TeamRef:
    """The team, when its token may manage the team's tokens and webhooks (scope admin)."""
    return require_scope(team, "admin")


SubmittingTeam = Annotated[TeamRef, Depends(get_submitting_team)]
AdminTeam = Annotated[TeamRef, Depends(get_admin_team)]


async def get_bearer_token(
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The bearer token, unchecked: for polled endpoints that authenticate in their own
    session together with their first read (one round trip instead of two sessions)."""
    if credentials is None:
        raise missing_token()
    return credentials.credentials


BearerToken = Annotated[str, Depends(get_bearer_token)]
