"""Repository functions the API, the CLI and the generation loop use (the scheduler writes
through kernelband.scheduling)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Integer, bindparam, func, select, true
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session, aliased

# The one token format lives in auth_tokens; TOKEN_PREFIX and hash_token are re-exported here.
from kernelband.auth_tokens import TOKEN_PREFIX as TOKEN_PREFIX
from kernelband.auth_tokens import hash_token as hash_token
from kernelband.auth_tokens import mint_token
from kernelband.db.models import (
    FINISHED_JOB_STATUSES,
    ApiToken,
    Event,
    Job,
    Measurement,
    Problem,
    Team,
    Track,
)

KNOWN_TARGETS = ("rtx4090", "a100", "h100", "h200", "cpu")


class NotFoundError(LookupError):
    """A row does not exist (or belongs to another team)."""


def create_team(session: Session, name: str) -> Team:
    """A new team (names are unique)."""
    team = Team(name=name)
    session.add(team)
    session.flush()
    return team


def get_or_create_team(session: Session, name: str) -> Team:
    """The team with this name, created when missing."""
    team = session.scalars(select(Team).where(Team.name == name)).first()
    return team or create_team(session, name)


def create_api_token(session: Session, team_id: int, name: str = "",
                     is_admin: bool = False) -> tuple[ApiToken, str]:
    """A new token row and its plaintext (shown once, never stored), in the API's format."""
    new = mint_token()
    token = ApiToken(team_id=team_id, name=name, prefix=new.prefix, token_hash=new.sha256,
                     is_admin=is_admin)
    session.add(token)
    session.flush()
    return token, new.secret


def find_token(session: Session, plaintext: str) -> ApiToken | None:
    """The live (not revoked) token matching this plaintext, or None."""
    query = select(ApiToken).where(ApiToken.token_hash == hash_token(plaintext),
                                   ApiToken.revoked_at.is_(None))
    return session.scalars(query).first()


def get_or_create_problem(session: Session, team_id: int, name: str, format: str, source: str,
                          loaded: dict[str, Any], content_hash: str) -> Problem:
    """The team's problem with this content hash, stored once."""
    query = select(Problem).where(Problem.team_id == team_id,
                                  Problem.content_hash == content_hash)
    problem = session.scalars(query).first()
    if problem is None:
        problem = Problem(team_id=team_id, name=name, format=format, source=source,
                          loaded=loaded, content_hash=content_hash)
        session.add(problem)
        session.flush()
    return problem


def create_job(session: Session, team_id: int, problem_id: int, targets: Sequence[str],
               **options: Any) -> Job:
    """A queued job; `options` are Job columns (policy, budget_iterations, parallelism, ...)."""
    unknown = [t for t in targets if t not in KNOWN_TARGETS]
    if not targets or unknown:
        raise ValueError(f"unknown or missing targets {unknown or list(targets)}; "
                         f"choose from {', '.join(KNOWN_TARGETS)}")
    if len(set(targets)) != len(targets):
        raise ValueError(f"targets repeat: {list(targets)}; name each target once")
    job = Job(team_id=team_id, problem_id=problem_id, targets=list(targets), **options)
    session.add(job)
    session.flush()
    return job


def get_job(session: Session, job_id: int, team_id: int | None = None) -> Job:
    """A job by id; `team_id` restricts to that team's jobs."""
    job = session.get(Job, job_id)
    if job is None or (team_id is not None and job.team_id != team_id):
        raise NotFoundError(f"job {job_id} not found; list jobs to see valid ids")
    return job


def list_jobs(session: Session, team_id: int, limit: int = 50, offset: int = 0) -> list[Job]:
    """The team's jobs, newest first."""
    query = (select(Job).where(Job.team_id == team_id).order_by(Job.id.desc())
             .limit(limit).offset(offset))
    return list(session.scalars(query))


def request_cancel(session: Session, job_id: int, team_id: int | None = None) -> Job:
    """Set the cancellation flag; the scheduler stops the job at its next step."""
    job = get_job(session, job_id, team_id)
    if job.status not in FINISHED_JOB_STATUSES:
        job.cancel_requested = True
    return job


def job_tracks(session: Session, job_id: int) -> list[Track]:
    """The job's tracks in target order of creation."""
    return list(session.scalars(select(Track).where(Track.job_id == job_id).order_by(Track.id)))


def events_after(session: Session, job_id: int, after: int = 0, limit: int = 500) -> list[Event]:
    """Events of a job with seq > after, oldest first."""
    query = (select(Event).where(Event.job_id == job_id, Event.seq > after)
             .order_by(Event.seq).limit(limit))
    return list(session.scalars(query))


def latest_measurements(session: Session, candidate_ids: Iterable[int]) -> dict[int, Measurement]:
    """The newest measurement of each candidate that has one, in one query.

    The candidates' measurements are looked up one candidate at a time inside the query (a
    lateral join over the ids, `OFFSET 0` keeping it one), so each is an index probe: with
    `candidate_id IN (...)` a planner without fresh statistics (nothing analyzes the table)
    scanned every measurement, a read that grew with every pull. The ids go as one array
    parameter: one statement however many there are."""
    ids = sorted(set(candidate_ids))
    if not ids:
        return {}
    if session.get_bind().dialect.name != "postgresql":  # no lateral unnest (SQLite: tests)
        query = (select(Measurement).where(Measurement.candidate_id.in_(ids))
                 .order_by(Measurement.candidate_id, Measurement.id.desc()))
        return _newest(session.scalars(query))
    wanted = func.unnest(bindparam("candidate_ids", ids, type_=ARRAY(Integer))) \
        .table_valued("id").render_derived()
    rows = (select(Measurement).where(Measurement.candidate_id == wanted.c.id)
            .offset(0).lateral("per_candidate"))
    found = aliased(Measurement, rows)
    query = (select(found).select_from(wanted).join(rows, true())
             .order_by(found.candidate_id, found.id.desc()))
    return _newest(session.scalars(query))


def _newest(measurements: Iterable[Measurement]) -> dict[int, Measurement]:
    """The first measurement of each candidate in newest-first order."""
    newest: dict[int, Measurement] = {}
    for measurement in measurements:
        newest.setdefault(measurement.candidate_id, measurement)
    return newest
