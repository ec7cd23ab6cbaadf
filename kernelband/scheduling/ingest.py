"""Applying one worker result per attempt kind: candidates, measurements, rewards, best.

`lock_attempt` reads the attempt, locked, with every row its result needs.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.orm import Session

from kernelband.bandit import FrontierEntry
from kernelband.db.models import (
    Attempt,
    Candidate,
    Event,
    Job,
    LlmUsage,
    Measurement,
    Track,
    Transcript,
    utcnow,
)
from kernelband.db.row_buffer import add_row, row_value
from kernelband.loop.dedupe import find_duplicate, mark_duplicate
from kernelband.loop.repairs import failure_of, schedule_repair
from kernelband.loop.skills import record_skill
from kernelband.loop.transcripts import record_transcript
from kernelband.loop.translate import kept_original, needs_translation, replaces_best
from kernelband.profile.measurement import Measurement as MeasurementValue
from kernelband.scheduling.attempts import new_attempt
from kernelband.scheduling.candidate_facts import note_measurement, note_static_profile
from kernelband.scheduling.children import attempt_candidate, generated_child
from kernelband.scheduling.events import append_event, prime_event_counters
from kernelband.scheduling.results import (
    CompileResult,
    GenerateResult,
    ProfileResult,
    TaskResultValue,
    VerifyResult,
    lost_result,
)
from kernelband.scheduling.state import (
    WITHOUT_STORED_STATE,
    frontier_entry,
    load_state,
    policy_for,
    save_state,
    write_final_view,
)
from kernelband.speedups import best_columns, of_measurement, of_track, paired_columns

LockedAttempt = tuple[Attempt, Track, Job, Candidate | None]


def lock_attempt(session: Session, attempt_id: int) -> LockedAttempt | None:
    """The attempt, locked, with its track, job, candidate and the job's last event number.

    Applying a result reads all of them; one round trip instead of five. Only the attempt row
    is locked (FOR UPDATE OF attempts): that lock makes a result apply at most once. Keep the
    returned tuple while applying: the session's identity map holds objects weakly, and the
    tuple is what keeps the track, job and candidate there for `session.get_one` to find.
    """
    row = session.execute(_LOCK_ONE, {"id": attempt_id}).first()
    if row is None:
        return None
    attempt, track, job, candidate, last = row
    prime_event_counters(session, {job.id: last or 0})
    return attempt, track, job, candidate


def locking_read(condition: Any) -> Select[Any]:
    """The attempts matching `condition` (bound parameters), locked, with their track, job,
    candidate and job's last event number. Built once per condition: building and cache-keying
    it cost more than the database took to answer it."""
    last_event = (select(func.max(Event.seq)).where(Event.job_id == Attempt.job_id)
                  .correlate(Attempt).scalar_subquery())
    return (select(Attempt, Track, Job, Candidate, last_event)
            .join(Track, Track.id == Attempt.track_id).join(Job, Job.id == Attempt.job_id)
            .outerjoin(Candidate, Candidate.id == Attempt.candidate_id)
            .where(condition).order_by(Attempt.id).with_for_update(of=Attempt)
            .options(WITHOUT_STORED_STATE))


_LOCK_ONE = locking_read(Attempt.id == bindparam("id"))


def apply_result(session: Session, attempt: Attempt, result: TaskResultValue,
                 locked: LockedAttempt | None = None) -> None:
    """Close the attempt and apply its result (the caller checked it is still open).

    `locked`: the attempt's rows as `lock_attempt(s)` read them, so that they are not looked
    up again in the identity map (None: looked up)."""
    # "done": a worker answered (even "rejected"); "failed": no usable answer, every try.
    attempt.state = "failed" if result.broken else "done"
    # a generate result's transcript lives in its own table, not in the attempt row
    attempt.result = (result.without_transcript() if isinstance(result, GenerateResult)
                      else result.to_dict())
    attempt.reason = None if result.ok else (result.reason or "failed")
    attempt.finished_at = utcnow()
    if locked is None:
        track = session.get_one(Track, attempt.track_id)
        job = session.get_one(Job, attempt.job_id)
        candidate = None
    else:
        track, job, candidate = locked[1], locked[2], locked[3]
    if isinstance(result, GenerateResult):
        apply_generate(session, job, track, attempt, result, parent=candidate)
    elif isinstance(result, CompileResult):
        apply_compile(session, job, track, attempt, result, candidate=candidate)
    elif isinstance(result, VerifyResult):
        apply_verify(session, job, track, attempt, result, locked_candidate=candidate)
    elif attempt.decision_id is None:  # a profile of the original kernel, not of a pull
        apply_baseline(session, job, track, attempt, result, candidate=candidate)
    else:
        apply_profile(session, job, track, attempt, result, candidate=candidate)


def fail_lost_attempt(session: Session, attempt: Attempt, reason: str) -> None:
    """An attempt lost for good counts as a failed result with that reason."""
    apply_result(session, attempt, lost_result(attempt.kind, reason))


def apply_generate(session: Session, job: Job, track: Track, attempt: Attempt,
                   result: GenerateResult, parent: Candidate | None = None) -> None:
    """Record usage and the transcript; a new child goes on to compile, a duplicate is
    recorded with its original's outcome, a failure gets a repair turn or ends the pull."""
    record_usage(session, job, attempt, result)
    child = None
    if result.ok and result.editable:
        child = new_child(session, track, attempt, result.editable, parent)
    transcript = record_transcript(session, attempt, result, child)
    if child is None:
        fail_pull(session, job, track, attempt, None, result, transcript)
        return
    original = find_duplicate(session, job, child)
    if original is not None:
        apply_duplicate(session, job, track, attempt, child, original)
        return
    new_attempt(session, track, "compile", child.id, attempt.decision_id)
    append_event(session, job.id, "candidate_generated", {
        "target": track.target, "candidate": child.id, "parent": child.parent_id,
        "strategy": child.strategy, "turn": child.turn})


def new_child(session: Session, track: Track, attempt: Attempt, editable: str,
              parent: Candidate | None = None) -> Candidate:
    """The generated child of the pull's parent (a repair turn's child too), with its id."""
    return generated_child(session, track, attempt, editable, parent)


def apply_duplicate(session: Session, job: Job, track: Track, attempt: Attempt,
                    child: Candidate, original: Candidate) -> None:
    """A child equal to `original` is never evaluated: it takes the original's outcome."""
    outcome = mark_duplicate(session, track, child, original)
    append_event(session, job.id, "candidate_duplicate", {
        "target": track.target, "candidate": child.id, "duplicate_of": original.id,
        "outcome": outcome})
    if original.status == "rejected":  # the same failure: a repair turn may follow
        fail_pull(session, job, track, attempt, child, failure_of(session, original))
        return
    # Nothing new joins the frontier, so the pull ends as a failed one (reward: failure reward).
    finish_pull(session, job, track, attempt, child, child.reason or "duplicate")


def fail_pull(session: Session, job: Job, track: Track, attempt: Attempt,
              child: Candidate | None, result: TaskResultValue,
              transcript: Transcript | None = None) -> None:
    """A failed child gets its next repair turn when one is due; otherwise the pull ends."""
    if schedule_repair(session, job, track, attempt, child, result, transcript):
        return
    reason = (child.reason if child is not None else None) or result.reason
    finish_pull(session, job, track, attempt, child, reason or "no code")


def apply_compile(session: Session, job: Job, track: Track, attempt: Attempt,
                  result: CompileResult, candidate: Candidate | None = None) -> None:
    """A compiled child goes on to be profiled on its target; a rejected one ends the pull."""
    child = attempt_candidate(session, attempt, candidate)
    child.static_profile = result.static_profile
    note_static_profile(session, child.id, result.static_profile)  # its profile's payload
    if not result.ok:
        reject(child, result)
        fail_pull(session, job, track, attempt, child, result)
        return
    child.status = "compiled"
    new_attempt(session, track, "profile", child.id, attempt.decision_id)


def apply_profile(session: Session, job: Job, track: Track, attempt: Attempt,
                  result: ProfileResult, candidate: Candidate | None = None) -> None:
    """A correct, measured child joins the frontier and may become the track's best."""
    child = attempt_candidate(session, attempt, candidate)
    if not result.ok or result.measurement is None:
        reject(child, result)
        fail_pull(session, job, track, attempt, child, result)
        return
    measurement = store_measurement(session, child, result.measurement, result.features)
    child.status = "measured"
    entry = frontier_entry(child, measurement)
    finish_pull(session, job, track, attempt, child, "measured", entry)
    record_skill(session, job, track, child, measurement)
    if replaces_best(session, job, track, measurement.time_ms):
        set_best(session, job, track, child, measurement)


def apply_baseline(session: Session, job: Job, track: Track, attempt: Attempt,
                   result: ProfileResult, candidate: Candidate | None = None) -> None:
    """The original kernel's measurement starts the track's bandit; without it the track fails."""
    original = attempt_candidate(session, attempt, candidate)
    if not result.ok or result.measurement is None:
        reject(original, result)
        track.status, track.finished_at = "failed", utcnow()
        track.reason = f"original kernel failed on {track.target}: {original.reason}"
        append_event(session, job.id, "track_failed", {"target": track.target,
                                                       "reason": track.reason})
        return
    measurement = store_measurement(session, original, result.measurement, result.features)
    original.status = "measured"
    state = policy_for(job).init_state(frontier_entry(original, measurement), job.seed)
    save_state(session, track, state)
    track.status, track.original_time_ms = "running", measurement.time_ms
    set_best(session, job, track, original, measurement)


def apply_verify(session: Session, job: Job, track: Track, attempt: Attempt,
                 result: VerifyResult, locked_candidate: Candidate | None = None) -> None:
    """Held-out acceptance: a pass completes the track, a failure falls back to the next best."""
    candidate = attempt_candidate(session, attempt, locked_candidate)
    if result.ok:
        track.held_out, track.held_out_reason = "passed", None
        record_final_speedup(session, job, track, candidate, result)
        complete_track(session, job, track)
        return
    reject(candidate, result, prefix="held_out:")
    append_event(session, job.id, "held_out_failed", {
        "target": track.target, "candidate": candidate.id, "reason": candidate.reason})
    fallback = next_best(session, track, faster_only=not needs_translation(session, job))
    if fallback is None:
        original = session.get_one(Candidate, track.original_candidate_id)
        best = _latest(session, original.id)
        set_best(session, job, track, original, best, announce=False)
        track.held_out, track.held_out_reason = kept_original(
            session, job, "no faster candidate passed held-out")
        complete_track(session, job, track)
        return
    candidate, measurement = fallback
    set_best(session, job, track, candidate, measurement, announce=False)
    new_attempt(session, track, "verify", candidate.id)


def record_final_speedup(session: Session, job: Job, track: Track, candidate: Candidate,
                         result: VerifyResult) -> None:
    """The final step's paired re-measure of the best against the original becomes the speedup
    the track reports (a verify result without one, e.g. an estimate, keeps the earlier one)."""
    if result.measurement is None:
        return
    measurement = store_measurement(session, candidate, result.measurement, result.features)
    set_best(session, job, track, candidate, measurement, announce=False)
    track.best_speedup_final = track.best_speedup_low is not None


def start_acceptance(session: Session, track: Track, why: str) -> None:
    """Stop searching; verify the best on held-out cases (the original needs no check)."""
    job = session.get_one(Job, track.job_id)
    track.status, track.reason = "accepting", why
    write_final_view(session, track)
    append_event(session, job.id, "track_accepting", {"target": track.target, "why": why})
    if track.best_candidate_id in (None, track.original_candidate_id):
        track.held_out, track.held_out_reason = kept_original(session, job,
                                                              "no faster candidate found")
        complete_track(session, job, track)
        return
    new_attempt(session, track, "verify", track.best_candidate_id)


def complete_track(session: Session, job: Job, track: Track) -> None:
    """Mark the track done and announce its final best."""
    track.status, track.finished_at = "completed", utcnow()
    shown = of_track(track)
    append_event(session, job.id, "track_completed", {
        "target": track.target, "best_candidate": track.best_candidate_id,
        "best_speedup": shown.point, "speedup_low": shown.low, "speedup_high": shown.high,
        "significant": shown.significant, "label": track.best_label,
        "held_out": track.held_out})


def finish_pull(session: Session, job: Job, track: Track, attempt: Attempt,
                child: Candidate | None, outcome: str, entry: FrontierEntry | None = None) -> None:
    """Feed the pull's reward back to the policy (entry None = failed child)."""
    policy, state = policy_for(job), load_state(track, shared=True)  # update returns a new one
    reward, state = policy.update(state, str(attempt.decision_id), entry)
    save_state(session, track, state)  # counts the pull finished (`state.write_back`)
    append_event(session, job.id, "pull_finished", {
        "target": track.target, "decision": attempt.decision_id,
        "candidate": child.id if child else None, "outcome": outcome, "reward": reward,
        "repair_turns": int(attempt.payload.get("turn") or 0) if attempt.kind == "generate"
        else (child.turn if child is not None else 0)})


def record_usage(session: Session, job: Job, attempt: Attempt, result: GenerateResult) -> None:
    """Tokens and cost of a generation, counted against the job's budgets."""
    prompt, completion = result.prompt_tokens, result.completion_tokens
    usd, known = result.cost_usd, result.cost_known
    if not (prompt or completion or result.model):
        return
    add_row(session, LlmUsage, {
        "job_id": job.id, "attempt_id": attempt.id, "model": result.model,
        "prompt_tokens": prompt, "completion_tokens": completion, "tokens": prompt + completion,
        "usd": usd, "cost_known": known, "created_at": utcnow()})
    # Only what changes is set: a set attribute makes the job a row the flush must compare.
    if prompt + completion:
        job.tokens_used += prompt + completion
    if usd:
        job.cost_usd += usd
    if not known and job.cost_known:
        job.cost_known = False


def _case_times(raw: Any) -> list[Any]:
    """[[case, ms], ...] from Measurement.case_times_ms (a dict); other shapes kept as a list."""
    if isinstance(raw, dict):
        return [[str(name), float(ms)] for name, ms in raw.items()]
    return list(raw or [])


def store_measurement(session: Session, candidate: Candidate, data: MeasurementValue,
                      features: dict[str, Any] | None) -> Measurement:
    """A measurement row from a result's measurement and its Features.to_dict().

    Inserted as a buffered row (`row_buffer`); the returned object is not in the session (its
    `id` is None), it carries the values for the frontier entry, best and skill."""
    values = {"candidate_id": candidate.id, "label": data.label, "method": data.method,
              "device": data.device, "target": data.target, "time_ms": float(data.time_ms),
              "case_times": _case_times(data.case_times_ms), "cv": data.cv,
              "noisy": bool(data.noisy), "paired_ratio": data.paired_ratio,
              **paired_columns(data.speedup.to_dict() if data.speedup is not None else None),
              "features": features, "created_at": utcnow()}
    add_row(session, Measurement, values)
    measurement = row_value(Measurement, values)
    note_measurement(session, candidate.id, measurement)  # the payload of a pull from it
    return measurement


def set_best(session: Session, job: Job, track: Track, candidate: Candidate,
             measurement: Measurement, announce: bool = True) -> None:
    """Make `candidate` the track's best; its speedup is the measurement's paired one (with its
    interval), the cost model's ratio for an estimate, and none for an unpaired measurement."""
    track.best_candidate_id, track.best_time_ms = candidate.id, measurement.time_ms
    track.best_label = measurement.label
    shown = of_measurement(measurement, track.original_time_ms,
                           is_original=candidate.id == track.original_candidate_id)
    for column, value in best_columns(shown).items():
        setattr(track, column, value)
    track.best_speedup_final = False
    if announce:
        append_event(session, job.id, "new_best", {
            "target": track.target, "candidate": candidate.id, "time_ms": measurement.time_ms,
            "speedup": shown.point, "speedup_low": shown.low, "speedup_high": shown.high,
            "significant": shown.significant, "label": measurement.label,
            "device": measurement.device})


def reject(candidate: Candidate, result: TaskResultValue, prefix: str = "") -> None:
    """Mark a candidate rejected with the machine-readable reason of the result."""
    candidate.status = "rejected"
    candidate.reason = prefix + (result.reason or "rejected")


def next_best(session: Session, track: Track,
              faster_only: bool = True) -> tuple[Candidate, Measurement] | None:
    """The fastest measured candidate (faster than the original unless not `faster_only`: a
    translation is credited even when slower than PyTorch) that is not rejected."""
    query = (select(Candidate, Measurement)
             .join(Measurement, Measurement.candidate_id == Candidate.id)
             .where(Candidate.track_id == track.id, Candidate.status == "measured",
                    Candidate.id != track.original_candidate_id)
             .order_by(Measurement.time_ms, Candidate.id))
    for candidate, measurement in session.execute(query).all():
        if (not faster_only or track.original_time_ms is None
                or measurement.time_ms < track.original_time_ms):
            return candidate, measurement
    return None


def _latest(session: Session, candidate_id: int) -> Measurement:
    query = (select(Measurement).where(Measurement.candidate_id == candidate_id)
             .order_by(Measurement.id.desc()))
    return session.scalars(query).first()  # type: ignore[return-value]
