"""What a generate task needs beyond its parent and profile: lineage memory, the team's best
one-shot example, or, on a repair turn, the conversation to continue."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from kernelband.db.models import Candidate, Job, Track, Transcript
from kernelband.generate.messages import RepairTurn
from kernelband.loop.memory import memory_lines
from kernelband.loop.skills import skill_example
from kernelband.loop.translate import translate_memory
from kernelband.problem.translate import TRANSLATE_STEP
from kernelband.scheduling.attempts import ClaimedAttempt


def needs_generation_context(generator: str, model: str | None) -> bool:
    """Whether a job's generate payloads carry a generation context (LLM jobs only)."""
    return generator == "llm" and bool(model)


def generation_context(session: Session, attempt: ClaimedAttempt, job: Job,
                       parent: Candidate) -> dict[str, Any]:
    """Extra payload keys of a generate attempt (none for the rules generator)."""
    if not needs_generation_context(job.generator, job.model):
        return {}
    repair = attempt.payload.get("repair")
    if isinstance(repair, dict):
        row = session.get(Transcript, int(repair.get("transcript") or 0))
        if row is None:
            return {"repair": None}
        turn = RepairTurn(turn=int(attempt.payload.get("turn") or 1),
                          conversation=tuple(row.messages or ()), reply=row.reply,
                          feedback=str(repair.get("feedback") or ""))
        return {"repair": turn.to_dict()}
    track = session.get_one(Track, attempt.track_id)
    strategy = attempt.payload.get("strategy")
    if attempt.payload.get("step") == TRANSLATE_STEP:  # PyTorch parent: no lineage, no example
        return {"memory": translate_memory(session, track, parent)}
    context: dict[str, Any] = {"memory": memory_lines(session, track, parent, strategy)}
    example = skill_example(session, job, parent.editable, strategy)
    if example is not None:
        context["example"] = example
    return context
