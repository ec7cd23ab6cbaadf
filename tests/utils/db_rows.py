"""Rows most database tests start from: a team's job on a toy problem, and a running track."""

from __future__ import annotations

import json

from sqlalchemy import Connection, text
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import repository
from kernelband.db.models import Job, Track
from kernelband.db.session import make_engine, session_scope


def new_job(session: Session, team_name: str) -> Job:
    """A queued cpu job of a new team, on a one-line toy problem."""
    team = repository.get_or_create_team(session, team_name)
    problem = repository.get_or_create_problem(
        session, team.id, "toy", "native", "X", {"editable": "X"}, "t" * 64)
    return repository.create_job(session, team.id, problem.id, ("cpu",))


def new_track(factory: sessionmaker[Session], team_name: str) -> int:
    """The id of a running cpu track of a new job (committed)."""
    with session_scope(factory) as session:
        track = Track(job_id=new_job(session, team_name).id, target="cpu", status="running")
        session.add(track)
        session.flush()
        return track.id


def old_schema_track(conn: Connection, status: str = "running", target: str = "cpu",
                     **track: object) -> None:
    """Team 1's job 1 and its track 1, written in plain SQL so they fit a schema older than the
    models (a migration test's rows from before it); `track` adds or overrides track columns."""
    conn.execute(text("INSERT INTO teams (name, skill_library, created_at) VALUES ('t', true, CURRENT_TIMESTAMP)"))
    conn.execute(text("INSERT INTO problems (team_id, name, format, content_hash, source, loaded, created_at) "
                      "VALUES (1, 'p', 'native', 'h', 's', '{}', CURRENT_TIMESTAMP)"))
    conn.execute(text("INSERT INTO jobs (team_id, problem_id, status, targets, policy, policy_params, generator, "
                      "model, seed, budget_iterations, parallelism, cancel_requested, tokens_used, cost_usd, "
                      "cost_known, created_at) VALUES (1, 1, :status, :targets, 'kernelband', '{}', 'rules', '', "
                      "0, 2, 1, false, 0, 0, true, CURRENT_TIMESTAMP)"),
                 {"status": status, "targets": json.dumps([target])})
    columns = {"job_id": 1, "target": target, "status": status, "iterations_dispatched": 0,
               "iterations_done": 0, "version": 1} | track
    conn.execute(text(f"INSERT INTO tracks ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})"),
                 columns)


def scalar(url: str, sql: str) -> object:
    """The one value `sql` selects, on a fresh engine (a migration test's database between steps)."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text(sql)).scalar_one()
    finally:
        engine.dispose()
