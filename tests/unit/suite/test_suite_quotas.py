"""A suite counts as one job against the team's limit and has a limit of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db import repository
from kernelband.db.models import Job
from kernelband.db.session import session_scope
from kernelband.problem.model import Case, KernelProblem
from kernelband.suite import SuiteSettings, create_suite
from services.api import queries
from services.api.app import create_app
from services.api.teams import create_token

SOURCE = "import x\n# kernelband: editable begin\nBODY\n# kernelband: editable end\n"


def toy_loader(source: str, format: str, name: str) -> KernelProblem:
    """A loaded problem without the sandbox (the quota logic never runs it)."""
    return KernelProblem(name=name, format="native", source=source, editable="BODY",
                         entry="entry", kernel_names=("k",), cases=(Case("c1", {"n": 4}),),
                         held_out_cases=(Case("h1", {"n": 5}, held_out=True),))


def seed_suite(factory: sessionmaker[Session], team: str, problems: int) -> tuple[int, str]:
    """A team with a suite of `problems` queued jobs; returns (team id, suite id)."""
    with session_scope(factory) as session:
        row = repository.get_or_create_team(session, team)
        loaded = [toy_loader(SOURCE + f"# {i}\n", "native", f"p{i}") for i in range(problems)]
        suite = create_suite(session, row.id, "s", "native", loaded, [],
                             SuiteSettings(targets=("cpu",), policies=("kernelband",),
                                           model="", budget=2, parallelism=1, seed=0))
        return row.id, suite.id


def plain_job(factory: sessionmaker[Session], team_id: int, label: str | None = None) -> int:
    with session_scope(factory) as session:
        problem = repository.get_or_create_problem(session, team_id, "toy", "native", SOURCE,
                                                   {"editable": "BODY"}, "t" * 64)
        return repository.create_job(session, team_id, problem.id, ("cpu",),
                                     suite_id=label).id


def test_a_suite_counts_once(db_factory: sessionmaker[Session]) -> None:
    team_id, suite_id = seed_suite(db_factory, "alpha", problems=5)
    plain_job(db_factory, team_id)
    plain_job(db_factory, team_id, label="my-label")  # a free label is just a job
    with session_scope(db_factory) as session:
        assert queries.active_job_count(session, team_id) == 3
        assert queries.active_suite_count(session, team_id) == 1
        for job in session.query(Job).filter(Job.suite_id == suite_id):
            job.status = "completed"
    with session_scope(db_factory) as session:
        assert queries.active_job_count(session, team_id) == 2  # a finished suite is free
        assert queries.active_suite_count(session, team_id) == 0


def test_another_teams_suite_is_not_counted(db_factory: sessionmaker[Session]) -> None:
    seed_suite(db_factory, "alpha", problems=2)
    other, _ = seed_suite(db_factory, "beta", problems=1)
    with session_scope(db_factory) as session:
        assert queries.active_job_count(session, other) == 1
        assert queries.active_suite_count(session, other) == 1


@pytest.fixture
def client(settings: Settings, sqlite_factory: sessionmaker[Session]) -> Iterator[TestClient]:
    limits = settings.model_copy(update={"max_concurrent_suites_per_team": 1,
                                         "max_concurrent_jobs_per_team": 2})
    app = create_app(limits, session_factory=sqlite_factory, problem_loader=toy_loader)
    with TestClient(app) as test_client:
        yield test_client


def auth_for(factory: sessionmaker[Session], team: str) -> dict[str, str]:
    with session_scope(factory) as session:
        return {"Authorization": f"Bearer {create_token(session, team)}"}


def suite_body() -> dict[str, object]:
    return {"name": "mini", "format": "native", "targets": ["cpu"], "policies": ["random"],
            "budget": 2, "problems": [{"name": f"p{i}", "source": SOURCE + f"# {i}\n"}
                                      for i in range(3)]}


def test_post_suite_respects_the_suite_limit(client: TestClient,
                                             sqlite_factory: sessionmaker[Session]) -> None:
    auth = auth_for(sqlite_factory, "alpha")
    first = client.post("/v1/suites", json=suite_body(), headers=auth)
    assert first.status_code == 201, first.text
    assert first.json()["jobs"] == 3  # three jobs, yet the job limit of 2 is not reached
    second = client.post("/v1/suites", json=suite_body(), headers=auth)
    assert second.status_code == 429, second.text
    assert second.json()["error"] == "too_many_suites"
    assert "limit is 1" in second.json()["message"]


def test_job_suite_labels_fit_the_column_and_skip_the_reserved_prefix(
        client: TestClient, sqlite_factory: sessionmaker[Session]) -> None:
    auth = auth_for(sqlite_factory, "alpha")
    body = {"problem": {"name": "toy", "format": "native", "source": SOURCE},
            "targets": ["cpu"], "budget": {"iterations": 2}}
    for label in ("x" * 65, "suite-0123456789abcdef"):
        refused = client.post("/v1/jobs", json={**body, "suite": label}, headers=auth)
        assert refused.status_code == 422, refused.text
    reserved = client.post("/v1/jobs", json={**body, "suite": "suite-1"}, headers=auth).json()
    assert "reserved for suites" in str(reserved)
    accepted = client.post("/v1/jobs", json={**body, "suite": "x" * 64}, headers=auth)
    assert accepted.status_code == 201, accepted.text
