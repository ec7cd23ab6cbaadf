"""FastAPI dependencies as `Annotated` aliases, so route signatures read like sentences."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db import session_scope
from kernelband.db.models import Team
from services.api.auth import authenticate, missing_token
from services.api.problems import ProblemLoader

_bearer = HTTPBearer(auto_error=False, description="A team token from `kernelband tokens create`.")


def get_settings(request: Request) -> Settings:
    """The Settings the app was created with."""
    settings: Settings = request.app.state.settings
    return settings


def get_session(request: Request) -> Iterator[Session]:
    """One session per request; routes that write commit explicitly before responding."""
    factory: sessionmaker[Session] = request.app.state.session_factory
    with session_scope(factory) as session:
        yield session


def get_problem_loader(request: Request) -> ProblemLoader:
    """The loader that validates submitted problems (the sandboxed one unless a test swaps it)."""
    loader: ProblemLoader = request.app.state.problem_loader
    return loader


# Ids are 32-bit integers on Postgres; a larger value can only be a typo, so say so as a 422.
MAX_ID = 2**31 - 1
JobId = Annotated[int, Path(ge=1, le=MAX_ID, description="The job id from POST /v1/jobs.")]

SettingsDep = Annotated[Settings, Depends(get_settings)]
SessionDep = Annotated[Session, Depends(get_session)]
ProblemLoaderDep = Annotated[ProblemLoader, Depends(get_problem_loader)]


def get_current_team(
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Team:
    """The team whose bearer token came with the request."""
    if credentials is None:
        raise missing_token()
    return authenticate(session, credentials.credentials)


CurrentTeam = Annotated[Team, Depends(get_current_team)]
