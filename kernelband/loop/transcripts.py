"""Transcripts: the prompt and reply of every generation and repair turn, secrets scrubbed."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.config import get_settings
from kernelband.db.models import Attempt, Candidate, Transcript
from kernelband.generate.scrub import scrub, scrub_messages
from kernelband.scheduling.results import GenerateResult


def _secrets() -> list[str]:
    key = get_settings().llm_api_key.get_secret_value()
    return [key] if key else []


def record_transcript(session: Session, attempt: Attempt, result: GenerateResult,
                      child: Candidate | None) -> Transcript | None:
    """Store the turn's messages and reply (None when no call was made, e.g. rules)."""
    if not result.messages and not result.reply:
        return None
    secrets = _secrets()
    row = Transcript(
        job_id=attempt.job_id, track_id=attempt.track_id, attempt_id=attempt.id,
        decision_id=attempt.decision_id, parent_id=attempt.candidate_id,
        candidate_id=child.id if child is not None else None,
        turn=int(attempt.payload.get("turn") or 0), strategy=attempt.payload.get("strategy"),
        model=result.model, messages=scrub_messages(list(result.messages), secrets),
        reply=scrub(result.reply, secrets),
        outcome=None if result.ok else (result.reason or "failed"),
        prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
        cost_usd=result.cost_usd)
    session.add(row)
    return row


def turn_transcript(session: Session, candidate_id: int) -> Transcript | None:
    """The transcript of the turn that produced this candidate."""
    query = (select(Transcript).where(Transcript.candidate_id == candidate_id)
             .order_by(Transcript.id.desc()).limit(1))
    return session.scalars(query).first()


def pull_transcripts(session: Session, job_id: int, decision_id: str | None,
                     track_id: int) -> list[Transcript]:
    """Every turn of one pull, oldest first."""
    query = (select(Transcript).where(Transcript.job_id == job_id,
                                      Transcript.track_id == track_id,
                                      Transcript.decision_id == decision_id)
             .order_by(Transcript.id))
    return list(session.scalars(query))


def job_transcripts(session: Session, job_id: int) -> list[Transcript]:
    """Every turn of a job, oldest first."""
    return list(session.scalars(select(Transcript).where(Transcript.job_id == job_id)
                                .order_by(Transcript.id)))


def transcript_dict(row: Transcript) -> dict[str, Any]:
    """A transcript as the API and the export show it."""
    return {"id": row.id, "attempt_id": row.attempt_id, "decision_id": row.decision_id,
            "parent_id": row.parent_id, "candidate_id": row.candidate_id, "turn": row.turn,
            "strategy": row.strategy, "model": row.model, "messages": list(row.messages or []),
            "reply": row.reply, "outcome": row.outcome, "prompt_tokens": row.prompt_tokens,
            "completion_tokens": row.completion_tokens, "cost_usd": row.cost_usd,
            "created_at": row.created_at.isoformat() if row.created_at else None}
