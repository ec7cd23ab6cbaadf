"""What the generation loop keeps: transcripts of every turn, and the team skill library."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import delete, func, select

from kernelband.db import session_scope
from kernelband.db.models import Problem, Skill, Team
from kernelband.loop.transcripts import job_transcripts, pull_transcripts, transcript_dict
from services.api import queries
from services.api.deps import CurrentTeam, DbDep, JobId, SubmittingTeam
from services.api.errors import ERROR_RESPONSES, ApiError
from services.api.ids import CandidateId, SkillId, public, public_or_none
from services.api.timefmt import UtcTime

router = APIRouter(tags=["generation loop"], responses=ERROR_RESPONSES)


class TranscriptOut(BaseModel):
    """One generation (turn 0) or repair turn: the messages sent and the reply, scrubbed."""

    id: str = Field(description="Public id, turn_ and 13 characters.")
    attempt_id: str | None
    decision_id: str | None
    parent_id: str | None
    candidate_id: str | None = Field(description="The child the reply produced (None: no usable code).")
    turn: int
    strategy: str | None
    model: str
    messages: list[dict[str, Any]]
    reply: str
    outcome: str | None = Field(description="Why the reply gave no child (None: it gave one).")
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    created_at: UtcTime | None


class TranscriptExport(BaseModel):
    """GET /v1/jobs/{id}/transcripts: every turn of a job, oldest first (replayable with
    `kernelband fake-llm --replay FILE`)."""

    job_id: str
    problem: str
    model: str
    transcripts: list[TranscriptOut]


class TranscriptChain(BaseModel):
    """The turns of the pull that produced a candidate, up to that candidate's turn."""

    candidate_id: str
    turns: list[TranscriptOut]


class SkillOut(BaseModel):
    """One verified improvement in the team's skill library."""

    id: str = Field(description="Public id, skill_ and 13 characters.")
    job_id: str | None
    candidate_id: str | None
    problem_name: str
    strategy: str
    target: str
    description: str
    speedup: float
    label: str = Field(description="measured | estimated")
    before: str
    after: str


class SkillLibrary(BaseModel):
    """GET /v1/skills."""

    enabled: bool
    skills: list[SkillOut]


class SkillSettings(BaseModel):
    """PUT /v1/skills/settings body."""

    model_config = ConfigDict(extra="forbid")  # as every request body: a typo is an error

    enabled: bool = Field(description="Off: improvements are neither stored nor retrieved.")


def _transcript_out(row: Any) -> TranscriptOut:
    data = transcript_dict(row)
    return TranscriptOut(**{**data, "id": public("turn", row.id),
                            "attempt_id": public_or_none("att", row.attempt_id),
                            "parent_id": public_or_none("cand", row.parent_id),
                            "candidate_id": public_or_none("cand", row.candidate_id)})


@router.get("/v1/jobs/{job_id}/transcripts", summary="Download a job's transcripts")
def list_transcripts(
    job_id: JobId, team: CurrentTeam, db: DbDep,
    download: Annotated[bool, Query(description="Send as a file attachment.")] = False,
) -> TranscriptExport:
    with session_scope(db) as session:
        job = queries.team_job(session, team.id, job_id)
        problem = session.get_one(Problem, job.problem_id)
        export = TranscriptExport(job_id=public("job", job.id), problem=problem.name,
                                  model=job.model,
                                  transcripts=[_transcript_out(t)
                                               for t in job_transcripts(session, job.id)])
    if not download:
        return export
    name = f"{export.problem}.{export.job_id}.transcripts.json"
    return JSONResponse(export.model_dump(mode="json"),  # type: ignore[return-value]
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})


@router.get("/v1/jobs/{job_id}/candidates/{candidate_id}/transcript",
            summary="The conversation that produced a candidate (its repair chain)")
def candidate_transcript(job_id: JobId, candidate_id: CandidateId, team: CurrentTeam,
                         db: DbDep) -> TranscriptChain:
    with session_scope(db) as session:
        job = queries.team_job(session, team.id, job_id)
        candidate, track = queries.job_candidate(session, job.id, candidate_id)
        turns = [t for t in pull_transcripts(session, job.id, candidate.decision_id, track.id)
                 if t.turn <= (candidate.turn or 0)] if candidate.decision_id else []
        return TranscriptChain(candidate_id=public("cand", candidate.id),
                               turns=[_transcript_out(t) for t in turns])


@router.get("/v1/skills", summary="Your team's skill library")
def list_skills(team: CurrentTeam, db: DbDep,
                limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> SkillLibrary:
    with session_scope(db) as session:
        row = session.get_one(Team, team.id)
        skills = session.scalars(select(Skill).where(Skill.team_id == team.id)
                                 .order_by(Skill.id.desc()).limit(limit)).all()
        return SkillLibrary(enabled=row.skill_library, skills=[SkillOut(
            id=public("skill", s.id), job_id=public_or_none("job", s.job_id),
            candidate_id=public_or_none("cand", s.candidate_id), problem_name=s.problem_name,
            strategy=s.strategy, target=s.target, description=s.description, speedup=s.speedup,
            label=s.label, before=s.before, after=s.after) for s in skills])


@router.put("/v1/skills/settings", summary="Switch your team's skill library on or off")
def set_skill_library(body: SkillSettings, team: SubmittingTeam, db: DbDep) -> SkillSettings:
    with session_scope(db) as session:
        session.get_one(Team, team.id).skill_library = body.enabled
        return SkillSettings(enabled=body.enabled)


@router.delete("/v1/skills", summary="Delete every entry of your team's skill library")
def delete_skills(team: SubmittingTeam, db: DbDep) -> dict[str, int]:
    with session_scope(db) as session:
        count = session.scalar(select(func.count(Skill.id)).where(Skill.team_id == team.id))
        session.execute(delete(Skill).where(Skill.team_id == team.id))
        return {"deleted": int(count or 0)}


@router.delete("/v1/skills/{skill_id}", summary="Delete one entry of your team's skill library")
def delete_skill(skill_id: SkillId, team: SubmittingTeam, db: DbDep) -> dict[str, int]:
    with session_scope(db) as session:
        skill = session.get(Skill, skill_id)
        if skill is None or skill.team_id != team.id:  # another team's entry looks missing
            raise ApiError(404, "not_found", f"Your team has no skill "
                           f"{public('skill', skill_id)}; list them "
                           "with GET /v1/skills.")
        session.delete(skill)
        return {"deleted": 1}
