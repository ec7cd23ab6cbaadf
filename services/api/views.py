"""ORM rows -> response models (the only place that knows both shapes)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from kernelband.db.models import Candidate, Job, Measurement, Problem, Track
from kernelband.speedups import of_measurement, of_track
from services.api import queries
from services.api.ids import public, public_or_none
from services.api.schemas import (
    BestOut,
    BudgetIn,
    BudgetOut,
    CandidateDetail,
    CandidateOut,
    JobOut,
    JobSummary,
    MeasurementOut,
    ProblemOut,
    SignatureOut,
    Spend,
    TrackOut,
)


def problem_out(problem: Problem, name: str | None = None) -> ProblemOut:
    """The public part of a stored problem, under the name a job submitted it with."""
    return ProblemOut(
        id=public("prob", problem.id), name=name or problem.name, format=problem.format,
        content_hash=problem.content_hash,
    )


def budget_out(job: Job) -> BudgetOut:
    """The job's budget as stored (never re-validated against request bounds)."""
    return BudgetOut(
        iterations=job.budget_iterations, tokens=job.budget_tokens, usd=job.budget_usd,
        wall_s=int(job.budget_wall_s or 0) or BudgetIn().wall_s,
    )


def track_out(target: str, track: Track | None, m: Measurement | None = None) -> TrackOut:
    """One track with its best candidate's measurement `m`; a target the scheduler has not
    started yet shows as pending."""
    if track is None:
        return TrackOut(target=target, status="pending")
    best = None
    if track.best_candidate_id is not None:
        shown = of_track(track)
        best = BestOut(
            candidate_id=public("cand", track.best_candidate_id), **shown.fields(), speedup_text=shown.text(),
            speedup_final=bool(track.best_speedup_final),
            time_ms=track.best_time_ms, label=track.best_label or (m.label if m else None),
            method=m.method if m else None, device=m.device if m else None,
        )
    return TrackOut(
        target=target, status=track.status, iterations_dispatched=track.iterations_dispatched,
        iterations_done=track.iterations_done, original_time_ms=track.original_time_ms,
        best=best, held_out=track.held_out, reason=track.held_out_reason or track.reason,
    )


def job_out(session: Session, job: Job, problem: Problem) -> JobOut:
    """A job with its tracks, best results and spend."""
    tracks = queries.job_tracks_with_best(session, job.id)
    outs = [track_out(t, *tracks.get(t, (None, None))) for t in job.targets]
    wall = queries.age_s(job.started_at, job.finished_at) if job.finished_at else None
    if job.started_at is not None and job.finished_at is None:
        wall = queries.age_s(job.started_at)
    spend = Spend(
        iterations=sum(t.iterations_done for t in outs), tokens=job.tokens_used,
        usd=job.cost_usd, usd_known=job.cost_known, wall_s=round(wall or 0.0, 3),
    )
    return JobOut(
        id=public("job", job.id), status=job.status, cancel_requested=job.cancel_requested,
        problem=problem_out(problem, job.problem_name), targets=list(job.targets), policy=job.policy,
        policy_params=job.policy_params, generator=job.generator, model=job.model, seed=job.seed,
        repair_turns=job.repair_turns if job.repair_turns is not None else 1,
        dedupe=job.dedupe if job.dedupe is not None else True,
        budget=budget_out(job), parallelism=job.parallelism, limits=dict(job.limits or {}),
        suite=job.suite_id, created_at=job.created_at, started_at=job.started_at,
        finished_at=job.finished_at, reason=job.reason, tracks=outs, spend=spend,
    )


def job_summary(job: Job, problem: Problem) -> JobSummary:
    """A job in a listing."""
    return JobSummary(
        id=public("job", job.id), status=job.status, problem_name=job.problem_name or problem.name, targets=list(job.targets),
        policy=job.policy, suite=job.suite_id, created_at=job.created_at,
    )


def measurement_out(m: Measurement, original_time_ms: float | None,
                    is_original: bool = False) -> MeasurementOut:
    """A measurement with its label and its speedup over the original on the same target:
    paired with its interval, an estimate's ratio, or none (never two unpaired times divided)."""
    shown = of_measurement(m, original_time_ms, is_original)
    return MeasurementOut(
        target=m.target, label=m.label, method=m.method, device=m.device, time_ms=m.time_ms,
        **shown.fields(), speedup_text=shown.text(), cv=m.cv, noisy=m.noisy,
        signature=signature_out(m.features),
    )


def signature_out(features: dict[str, Any] | None) -> SignatureOut | None:
    """h of a stored feature vector, with its source (one source: all three come together)."""
    h, sources = (features or {}).get("h") or [], (features or {}).get("h_sources") or []
    if len(h) != 3:
        return None
    return SignatureOut(sm_pct=h[0], dram_pct=h[1], l2_pct=h[2],
                        source="/".join(dict.fromkeys(sources)) or "unknown",
                        note=str((features or {}).get("h_note") or ""))


def candidate_out(c: Candidate, track: Track, measurements: list[Measurement]) -> CandidateOut:
    """A candidate with its lineage, status, rejection reason and measurements."""
    return CandidateOut(
        id=public("cand", c.id), target=track.target, parent_id=public_or_none("cand", c.parent_id), lineage_depth=c.lineage_depth,
        strategy=c.strategy, status=c.status, reason=c.reason, created_at=c.created_at,
        measurements=[measurement_out(m, track.original_time_ms,
                                      is_original=c.id == track.original_candidate_id)
                      for m in measurements],
        turn=c.turn or 0, repair_of=public_or_none("cand", c.repair_of),
        duplicate_of=public_or_none("cand", c.duplicate_of),
    )


def candidate_detail(c: Candidate, track: Track, measurements: list[Measurement]) -> CandidateDetail:
    """A candidate with its source region."""
    base = candidate_out(c, track, measurements)
    return CandidateDetail(**base.model_dump(), editable=c.editable)
