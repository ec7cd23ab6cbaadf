"""Dashboard routes: page shells, local static assets, and two team-scoped JSON helpers."""

from __future__ import annotations

from datetime import datetime
from importlib import resources
from pathlib import Path as FilePath
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel
from sqlalchemy import case, func, select

from kernelband.db import session_scope
from kernelband.db.models import FINISHED_JOB_STATUSES, Candidate, Job, Problem, Suite, Track
from kernelband.public_ids import internal
from services.api import queries
from services.api.deps import CurrentTeam, DbDep, JobId
from services.api.errors import ERROR_RESPONSES, ApiError
from services.api.ids import CandidateId, public
from services.api.schemas import JobOut
from services.api.views import job_out

HERE = FilePath(str(resources.files("services.api.dashboard")))  # package data in a wheel too
STATIC = HERE / "static"
templates = Jinja2Templates(directory=str(HERE / "templates"))
router = APIRouter(tags=["dashboard"], responses=ERROR_RESPONSES)

# Static files are listed explicitly, so a request can never name a path outside this folder.
_MEDIA = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
STATIC_FILES = {p.name: p for p in STATIC.iterdir() if p.suffix in _MEDIA}


class DashboardJob(JobOut):
    """A job as the jobs page lists it: JobOut plus the owning team's name."""

    owner: str


class DashboardSuite(BaseModel):
    """A suite as the suites page lists it (details come from GET /v1/suites/{id})."""

    suite_id: str
    name: str
    format: str
    created_at: datetime | None
    jobs: int
    jobs_finished: int
    load_failures: int


PAGES = {"signin": "Sign in", "jobs": "Jobs", "job": "Job", "fleet": "Fleet",
         "suites": "Suites", "suite": "Suite", "notfound": "Not found"}
SuiteId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]


def _page(request: Request, name: str, status_code: int = 200, **context: object) -> HTMLResponse:
    return templates.TemplateResponse(
        request, f"{name}.html", {"title": PAGES[name], "page": name, **context},
        status_code=status_code,
    )


@router.get("/", include_in_schema=False)
def root() -> RedirectResponse:
    """The dashboard is the landing page for people; machines use /v1 and /docs."""
    return RedirectResponse("/ui/jobs")


@router.get("/ui", include_in_schema=False)
@router.get("/ui/signin", response_class=HTMLResponse, include_in_schema=False)
def signin_page(request: Request) -> HTMLResponse:
    """Sign-in page: the team token is kept in sessionStorage for this browser session."""
    return _page(request, "signin")


@router.get("/ui/jobs", response_class=HTMLResponse, include_in_schema=False)
def jobs_page(request: Request) -> HTMLResponse:
    """The team's jobs with a submit form."""
    return _page(request, "jobs")


@router.get("/ui/jobs/{job_id}", response_class=HTMLResponse, include_in_schema=False)
def job_page(request: Request, job_id: Annotated[str, Path(max_length=200)],
             db: DbDep) -> HTMLResponse:
    """One job: chart, bandit arms, lineage, best kernel diff; a 404 page for no such job.

    The page request carries no token (it lives in the tab's storage), so this says only
    that the id exists; the page's API calls show another team's job as not found."""
    found = internal("job", job_id)
    if found is not None:
        with session_scope(db) as session:
            found = session.scalar(select(Job.id).where(Job.id == found))
    if found is None:
        return _page(request, "notfound", what=f"job {job_id}", status_code=404)
    return _page(request, "job", job_id=job_id)


@router.get("/ui/suites", response_class=HTMLResponse, include_in_schema=False)
def suites_page(request: Request) -> HTMLResponse:
    """The team's suites, newest first."""
    return _page(request, "suites")


@router.get("/ui/suites/{suite_id}", response_class=HTMLResponse, include_in_schema=False)
def suite_page(request: Request, suite_id: SuiteId) -> HTMLResponse:
    """One suite: metrics table, speedup distribution, per-problem table, load failures."""
    return _page(request, "suite", suite_id=suite_id)


@router.get("/ui/fleet", response_class=HTMLResponse, include_in_schema=False)
def fleet_page(request: Request) -> HTMLResponse:
    """Workers and queue depths."""
    return _page(request, "fleet")


@router.get("/ui/static/{name}", include_in_schema=False)
def static_file(name: str) -> FileResponse:
    """A dashboard asset (served locally: the dashboard needs no CDN)."""
    path = STATIC_FILES.get(name)
    if path is None:
        raise ApiError(404, "not_found", f"No dashboard asset named '{name}'.")
    return FileResponse(path, media_type=_MEDIA[path.suffix],
                        headers={"Cache-Control": "no-cache"})


@router.get("/ui/api/jobs", summary="Dashboard: the team's jobs with tracks and spend")
def dashboard_jobs(
    team: CurrentTeam, db: DbDep,
    status: Annotated[str | None, Query(max_length=16)] = None,
    target: Annotated[str | None, Query(max_length=16)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> list[DashboardJob]:
    """Like GET /v1/jobs, but each job carries its tracks, best speedups, spend and owner."""
    with session_scope(db) as session:
        rows, _ = queries.list_jobs(session, team.id, status=status or None, target=target or None,
                                    suite=None, limit=limit, offset=0)
        return [DashboardJob(**job_out(session, job, problem).model_dump(), owner=team.name)
                for job, problem in rows]


@router.get("/ui/api/suites", summary="Dashboard: the team's suites with their progress")
def dashboard_suites(
    team: CurrentTeam, db: DbDep, limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> list[DashboardSuite]:
    """Newest first: id, name, format, creation time, jobs and how many finished."""
    with session_scope(db) as session:
        suites = session.scalars(select(Suite).where(Suite.team_id == team.id)
                                 .order_by(Suite.created_at.desc(), Suite.id).limit(limit)).all()
        counts = {suite_id: (int(total), int(done or 0)) for suite_id, total, done in session.execute(
            select(Job.suite_id, func.count(Job.id),
                   func.sum(case((Job.status.in_(FINISHED_JOB_STATUSES), 1), else_=0)))
            .where(Job.team_id == team.id, Job.suite_id.in_([s.id for s in suites]))
            .group_by(Job.suite_id)).all()}
        return [DashboardSuite(suite_id=s.id, name=s.name, format=s.format, created_at=s.created_at,
                               jobs=counts.get(s.id, (0, 0))[0],
                               jobs_finished=counts.get(s.id, (0, 0))[1],
                               load_failures=len(s.load_failures or []))
                for s in suites]


@router.get("/ui/api/jobs/{job_id}/candidates/{candidate_id}/source",
            summary="Dashboard: a candidate's kernel region and its track's original")
def candidate_source(
    job_id: JobId, candidate_id: CandidateId, team: CurrentTeam, db: DbDep,
) -> dict[str, object]:
    """The editable region of a candidate and of the original, for the diff view."""
    with session_scope(db) as session:
        job = queries.team_job(session, team.id, job_id)
        row = session.execute(
            select(Candidate, Track).join(Track, Track.id == Candidate.track_id)
            .where(Candidate.id == candidate_id, Track.job_id == job.id)
        ).first()
        if row is None:
            job_ref = public("job", job_id)
            raise ApiError(404, "not_found", f"Job {job_ref} has no candidate "
                           f"{public('cand', candidate_id)}; list them with "
                           f"GET /v1/jobs/{job_ref}/candidates.")
        candidate, track = row
        original = session.get(Candidate, track.original_candidate_id) if track.original_candidate_id else None
        problem = session.get(Problem, job.problem_id)
        own = queries.measurements_by_candidate(session, [candidate.id])[candidate.id]
        timed = [m for m in own if m.target == track.target]
        return {
            "candidate_id": public("cand", candidate.id), "target": track.target, "status": candidate.status,
            "label": timed[-1].label if timed else None,
            "reason": candidate.reason, "strategy": candidate.strategy,
            "editable": candidate.editable,
            "original_editable": original.editable if original else None,
            "problem_name": job.problem_name or (problem.name if problem else None),
        }
