"""Repair turns in the scheduler: a failed child's pull continues with one more generate
attempt (same decision, same parent) carrying the trimmed failure, while turns and budgets last.

The bandit still sees one pull: only the pull's final outcome reaches `finish_pull`.
"""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.db.models import Attempt, Candidate, Job, Problem, Track, Transcript, utcnow
from kernelband.generate.repair import failure_feedback, is_repairable
from kernelband.loop.transcripts import turn_transcript
from kernelband.problem.model import KernelProblem
from kernelband.scheduling.attempts import new_attempt
from kernelband.scheduling.budgets import budget_reason
from kernelband.scheduling.events import append_event
from kernelband.scheduling.results import CompileResult, TaskResultValue, read_result


def _problem(session: Session, job: Job) -> KernelProblem | None:
    loaded = session.get_one(Problem, job.problem_id).loaded
    try:
        return KernelProblem.from_dict(loaded)
    except (KeyError, TypeError, ValueError):  # a partial row (tests, old data): no case names
        return None


def _failed_turn(session: Session, attempt: Attempt, failed: Candidate | None,
                 transcript: Transcript | None) -> tuple[int, int | None, Transcript | None]:
    """(turn, parent id, transcript) of the turn whose output failed."""
    if attempt.kind == "generate":
        if transcript is None:
            transcript = session.scalars(select(Transcript)
                                         .where(Transcript.attempt_id == attempt.id)).first()
        return int(attempt.payload.get("turn") or 0), attempt.candidate_id, transcript
    assert failed is not None  # compile and profile attempts always have their child
    return failed.turn, failed.parent_id, turn_transcript(session, failed.id)


def repair_blocked(job: Job, turn: int, reason: str) -> str | None:
    """Why no repair turn follows (None: one is due)."""
    if job.generator != "llm" or not job.model:
        return "the rules generator does not repair"
    if turn >= job.repair_turns:
        return f"repair turns used ({turn} of {job.repair_turns})"
    if not is_repairable(reason):
        return f"{reason or 'this failure'} is not the code's fault"
    return budget_reason(job, utcnow())


def schedule_repair(session: Session, job: Job, track: Track, attempt: Attempt,
                    failed: Candidate | None, result: TaskResultValue,
                    transcript: Transcript | None = None) -> bool:
    """Queue the pull's next repair turn; False (the pull ends) when none is due."""
    if result.lost:  # no answer at all (lease expired every try): nothing to show
        return False
    reason = result.reason
    turn, parent_id, transcript = _failed_turn(session, attempt, failed, transcript)
    blocked = repair_blocked(job, turn, reason)
    if blocked is None and (transcript is None or not transcript.reply):
        blocked = "no recorded reply to continue"
    if blocked is not None or transcript is None:
        return False
    session.flush()  # the transcript needs its id
    first = session.get(Attempt, transcript.attempt_id) if transcript.attempt_id else None
    origin = first.payload if first is not None else {}
    ref = {"strategy": transcript.strategy, "cluster": origin.get("cluster"),
           "seed": origin.get("seed"), "turn": turn + 1, **({"step": origin["step"]}
                                                             if origin.get("step") else {}),
           "repair": {"transcript": transcript.id, "failed_candidate": failed.id if failed else None,
                      "feedback": failure_feedback(result.to_dict(), _problem(session, job))}}
    new_attempt(session, track, "generate", parent_id, attempt.decision_id, ref)
    append_event(session, job.id, "repair_requested", {
        "target": track.target, "decision": attempt.decision_id, "turn": turn + 1,
        "failed_candidate": failed.id if failed else None, "reason": reason})
    return True


def failure_of(session: Session, candidate: Candidate) -> TaskResultValue:
    """The result that rejected a candidate (for a duplicate's repair), or its reason alone."""
    query = (select(Attempt.kind, Attempt.result).where(Attempt.candidate_id == candidate.id,
                                                        Attempt.kind.in_(("compile", "profile")),
                                                        Attempt.state == "done")
             .order_by(Attempt.id.desc()).limit(1))
    found = session.execute(query).first()
    result = (read_result(found.kind, found.result) if found is not None
              else CompileResult(ok=False))
    return replace(result, ok=False, reason=candidate.reason or result.reason or "rejected")
