"""Turning a validated POST /v1/jobs body into problem and job rows."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from kernelband import usage
from kernelband.config import Settings
from kernelband.db import ConflictError
from kernelband.db.models import Job, Problem, Team, utcnow
from kernelband.generate.model_check import model_refusal
from kernelband.problem.translate import translation_refusal
from services.api import problems, queries
from services.api.errors import ApiError
from services.api.problems import ProblemLoader
from services.api.schemas import JobCreate


def validate_policy(name: str, params: dict[str, Any]) -> None:
    """422 with the policy's own message when the name or params are invalid."""
    # Imported here: the policies load scipy and scikit-learn (about 1,000 modules), which
    # nothing else in the API process needs, so an API that never sees a submission skips them.
    from kernelband.bandit import PolicyConfigError, make_policy

    try:
        make_policy(name, params)
    except PolicyConfigError as exc:
        raise ApiError(
            422, "invalid_policy",
            f"Invalid policy settings: {str(exc).removeprefix('kernelband: ')}. Fix `policy` or "
            "`policy_params` and submit again.",
        ) from exc


def check_concurrency(
    session: Session, team_id: int, settings: Settings, *, lock: bool = False
) -> None:
    """429 when the team already has its maximum of unfinished jobs (its quota, else the
    service's limit) or used up a daily quota (GPU-seconds, USD).

    With `lock`, the team row is locked first (Postgres) so two concurrent submissions cannot
    both pass the count; SQLite serialises writers by itself."""
    if lock:
        session.execute(select(Team.id).where(Team.id == team_id).with_for_update())
    active = queries.active_job_count(session, team_id)
    breach = (usage.concurrency_breach(session, team_id, active,
                                       settings.max_concurrent_jobs_per_team)
              or usage.teams_over_quota(session).get(team_id))
    if breach is not None:
        raise quota_error(breach)


def quota_error(breach: usage.QuotaBreach) -> ApiError:
    """429 naming the limit and when it resets (Retry-After in seconds for daily ones)."""
    code = "too_many_jobs" if breach.limit == "concurrent_jobs" else "quota_exceeded"
    headers = {"X-KernelBand-Quota": breach.limit}
    if breach.resets_at is not None:
        wait = max(1, int((breach.resets_at - utcnow()).total_seconds()))
        headers["Retry-After"] = str(wait)
    message = breach.message()
    if breach.limit == "concurrent_jobs":
        message += " Cancel one with POST /v1/jobs/{id}/cancel to submit now."
    return ApiError(429, code, message, headers=headers)


def check_suite_concurrency(session: Session, team_id: int, settings: Settings) -> None:
    """429 when the team already runs its maximum of unfinished suites (or of jobs)."""
    session.execute(select(Team.id).where(Team.id == team_id).with_for_update())
    active = queries.active_suite_count(session, team_id)
    limit = settings.max_concurrent_suites_per_team
    if active >= limit:
        raise ApiError(
            429, "too_many_suites",
            f"Your team has {active} unfinished suites and the limit is {limit}; wait for one "
            "to finish, or cancel its jobs (GET /v1/suites/{id} lists them, then "
            "POST /v1/jobs/{id}/cancel).",
        )
    check_concurrency(session, team_id, settings)  # a suite counts as one job of that quota


def check_model(model: str, settings: Settings) -> None:
    """422 at once for a generator model that cannot work here (see `model_refusal`)."""
    if reason := model_refusal(model, settings.llm_api_base):
        raise ApiError(422, "unknown_model", f"generator.model '{model}' is refused: {reason}.")


def check_translation(body: JobCreate) -> None:
    """422 at once for a KernelBench file as published without an LLM model to translate it."""
    src = body.problem
    if reason := translation_refusal(src.source, src.format, body.generator.model):
        raise ApiError(422, "llm_model_required", f"The problem '{src.name}' is refused: {reason}.")


def stored_problem(
    session: Session, team_id: int, body: JobCreate, loader: ProblemLoader
) -> Problem:
    """The team's problem row for this source, loading it in the sandbox only when new."""
    src = body.problem
    digest = problems.content_hash(src.source, src.format, src.perf_source)
    existing = problems.find_problem(session, team_id, digest)
    if existing is not None:
        return existing
    # End the read transaction: the sandboxed load may take seconds and must not hold a
    # database connection meanwhile.
    session.rollback()
    loaded = problems.load_or_reject(loader, src.source, src.format, src.name)
    loaded = problems.attach_perf_or_reject(loaded, src.perf_source)
    row = problems.new_problem(team_id, loaded, digest)
    session.add(row)
    try:
        session.flush()
    except IntegrityError as exc:  # a concurrent submission stored the same content first
        session.rollback()
        existing = problems.find_problem(session, team_id, digest)
        if existing is None:
            raise ConflictError(f"could not store problem {digest[:12]}: {exc}") from exc
        return existing
    return row


def new_job(team_id: int, problem: Problem, body: JobCreate) -> Job:
    """A queued job row for the scheduler to pick up."""
    model = body.generator.model
    return Job(
        team_id=team_id, problem_id=problem.id, status="queued",
        targets=[t.value for t in body.targets], policy=body.policy,
        policy_params=body.policy_params, generator="llm" if model else "rules", model=model,
        seed=body.seed, budget_iterations=body.budget.iterations,
        budget_tokens=body.budget.tokens, budget_usd=body.budget.usd,
        budget_wall_s=float(body.budget.wall_s), parallelism=body.parallelism,
        suite_id=body.suite, problem_name=body.problem.name, repair_turns=body.generator.repair_turns,
        dedupe=body.generator.dedupe, limits=body.limits.fields(),
    )
