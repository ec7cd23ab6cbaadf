"""API test fixtures: a real database (SQLite file, or Postgres when asked) and a client."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from api_doubles import parsing_loader  # this directory is on sys.path under pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db import Base, make_engine, make_session_factory, session_scope
from kernelband.db.models import ArmStat, Candidate, Event, Measurement, Track
from services.api.app import create_app
from services.api.teams import create_token
from tests.utils.public_ids import public_id, row_id

CHILD_REGION = """@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pass  # the faster child


def entry(x, y):
    return x + y
"""

PG_ADMIN_URL = os.environ.get("KERNELBAND_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")

VALID_SOURCE = (Path(__file__).resolve().parents[3] / "examples" / "vector_add.py").read_text()


def _postgres_engine() -> Iterator[Engine]:
    """A fresh, throw-away Postgres database; skipped when the server is not there."""
    name = f"kb_api_test_{uuid.uuid4().hex[:10]}"
    try:
        admin = create_engine(PG_ADMIN_URL.replace("postgresql://", "postgresql+psycopg2://"),
                              isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # no server on this machine: the SQLite runs still cover the API
        pytest.skip(f"Postgres not reachable at {PG_ADMIN_URL}: {exc}")
    engine = make_engine(PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}")
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=["sqlite"])
def db_kind(request: pytest.FixtureRequest) -> str:
    """Which database backs the test; modules override this to add "postgres"."""
    return str(request.param)


@pytest.fixture
def engine(db_kind: str, tmp_path: Path) -> Iterator[Engine]:
    """A real database with the service's schema."""
    if db_kind == "postgres":
        gen = _postgres_engine()
        eng = next(gen)
    else:
        eng = make_engine(f"sqlite:///{tmp_path / 'api.sqlite'}")
    Base.metadata.create_all(eng)
    yield eng
    if db_kind == "postgres":
        next(gen, None)
    else:
        eng.dispose()


@pytest.fixture
def factory(engine: Engine) -> sessionmaker[Session]:
    return make_session_factory(engine)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path, max_source_bytes=4096, max_concurrent_jobs_per_team=3,
                    broker_url="")


@pytest.fixture
def app(settings: Settings, factory: sessionmaker[Session]) -> FastAPI:
    return create_app(settings, session_factory=factory, problem_loader=parsing_loader,
                      embedded=True)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


@pytest.fixture
def make_token(factory: sessionmaker[Session]) -> Callable[[str], str]:
    """Mints a fresh token for a team (created if new)."""

    def mint(team: str) -> str:
        with session_scope(factory) as session:
            return create_token(session, team)

    return mint


@pytest.fixture
def token(make_token: Callable[[str], str]) -> str:
    return make_token("alpha")


@pytest.fixture
def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _job_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "problem": {"source": VALID_SOURCE, "format": "native", "name": "vector_add"},
        "targets": ["h100", "cpu"],
        "budget": {"iterations": 5},
    }
    body.update(overrides)
    return body


@pytest.fixture
def job_body() -> Callable[..., dict[str, Any]]:
    """Builds a valid POST /v1/jobs body, with overrides."""
    return _job_body


PAIRED_METHOD = "interleaved ABBA rounds, bootstrap 95%"


@pytest.fixture
def seed_results(factory: sessionmaker[Session]) -> Callable[[int | str], dict[str, Any]]:
    """Writes what the scheduler would for a job's h100 track (the job by its public id or
    row id); returns the candidates' public ids (as the API shows them), their row ids
    (`original_row`, ...) and the track's row id."""

    def seed(job: int | str) -> dict[str, Any]:
        job_id = job if isinstance(job, int) else row_id(factory, job)
        with session_scope(factory) as s:
            track = Track(job_id=job_id, target="h100", status="running", iterations_done=2,
                          iterations_dispatched=3, original_time_ms=2.0)
            s.add(track)
            s.flush()
            original = Candidate(track_id=track.id, editable="# original", status="measured")
            s.add(original)
            s.flush()
            child = Candidate(track_id=track.id, parent_id=original.id, strategy="tiling",
                              editable=CHILD_REGION, status="measured", lineage_depth=1)
            bad = Candidate(track_id=track.id, parent_id=original.id, strategy="fusion",
                            editable="x", status="rejected", lineage_depth=1,
                            reason="wrong_result:case=2,max_abs_err=0.5")
            s.add_all([child, bad])
            s.flush()
            s.add_all([
                Measurement(candidate_id=original.id, label="measured", method="cuda_events",
                            device="NVIDIA H100", target="h100", time_ms=2.0, features={
                                "h": [20.0, 75.5, 40.0], "h_sources": ["estimate"] * 3,
                                "h_note": "ncu permission: ERR_NVGPUCTRPERM"}),
                Measurement(candidate_id=child.id, label="measured", method="cuda_events",
                            device="NVIDIA H100", target="h100", time_ms=0.5, cv=0.01,
                            features={"h": [30.25, 88.0, 51.5], "h_sources": ["ncu"] * 3},
                            speedup=4.0, speedup_low=3.8, speedup_high=4.2, speedup_rounds=30,
                            speedup_method=PAIRED_METHOD, speedup_baseline="original"),
            ])
            track.original_candidate_id, track.best_candidate_id = original.id, child.id
            track.best_time_ms, track.best_speedup, track.best_label = 0.5, 4.0, "measured"
            track.best_speedup_low, track.best_speedup_high = 3.8, 4.2
            track.best_speedup_method = PAIRED_METHOD
            track.held_out = "passed"
            s.add_all([
                ArmStat(track_id=track.id, cluster=0, strategy="tiling", pulls=2.0,
                        mean_reward=0.75, masked=False, ucb_score=1.9),
                ArmStat(track_id=track.id, cluster=0, strategy="pipeline", pulls=1.0,
                        mean_reward=0.5, masked=True, ucb_score=None),
            ])
            s.add_all([Event(job_id=job_id, seq=i, kind="candidate", payload={"n": i})
                       for i in range(1, 8)])
            rows = {"original": original.id, "child": child.id, "bad": bad.id}
            return {"track": track.id, **{f"{k}_row": v for k, v in rows.items()},
                    **{k: public_id(s, "cand", v) for k, v in rows.items()}}

    return seed
