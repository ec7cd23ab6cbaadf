"""Embedded `kernelband optimize` (rules generator) per example and policy on the GPU's target,
and every recorded (parent, strategy, child) read back from the job's database."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

POLICIES = ("kernelband", "random", "ucb1")


def run_job(example: Path, policy: str, target: str, budget: int, data_dir: Path,
            wall_s: float | None) -> dict[str, Any]:
    """One embedded job, exactly what `kernelband optimize FILE --target T --policy P` runs."""
    from kernelband.config import Settings
    from kernelband.engine_embedded import JobOptions, run_local_job
    from kernelband.sandbox import load_problem_sandboxed

    problem = load_problem_sandboxed(example.read_text(), "native", example.stem)
    settings = Settings(data_dir=data_dir)
    options = JobOptions(targets=(target,), policy=policy, budget=budget, parallel=2, seed=0,
                         budget_wall_s=wall_s)
    outcome = run_local_job(settings, problem, options)
    track = outcome.tracks[0]
    return {
        "example": example.stem, "policy": policy, "target": target, "budget": budget,
        "status": outcome.status, "reason": outcome.reason, "wall_s": round(outcome.wall_s, 1),
        "iterations_done": track.iterations_done, "original_ms": track.original_time_ms,
        "best_ms": track.best_time_ms, "best_speedup": track.best_speedup, "label": track.label,
        "held_out": track.held_out, "lineage": list(track.lineage), "attempts": outcome.attempts,
        "records": job_records(outcome.database_url, outcome.job_id),
    }


def job_records(url: str, job_id: int) -> dict[str, Any]:
    """Candidates (with measurements) and generation attempts of one job, as plain dicts."""
    from sqlalchemy import select

    from kernelband.db.models import Attempt, Candidate, Measurement, Track
    from kernelband.db.session import open_database, session_scope

    engine, factory = open_database(url, migrate=False)
    with session_scope(factory) as session:
        track = session.scalars(select(Track).where(Track.job_id == job_id)).one()
        candidates = []
        for cand in session.scalars(select(Candidate).where(Candidate.track_id == track.id)):
            measured = session.scalars(select(Measurement).where(Measurement.candidate_id == cand.id)
                                       .order_by(Measurement.id)).first()
            candidates.append({
                "id": cand.id, "parent_id": cand.parent_id, "strategy": cand.strategy,
                "decision_id": cand.decision_id, "status": cand.status, "reason": cand.reason,
                "editable": cand.editable, "original": cand.id == track.original_candidate_id,
                "measurement": None if measured is None else {
                    "label": measured.label, "time_ms": measured.time_ms, "cv": measured.cv,
                    "noisy": measured.noisy, "paired_ratio": measured.paired_ratio,
                    "device": measured.device, "features": measured.features},
            })
        generations = [{"parent_id": a.candidate_id, "strategy": (a.payload or {}).get("strategy"),
                        "decision_id": a.decision_id, "state": a.state,
                        "ok": bool((a.result or {}).get("ok")), "reason": a.reason}
                       for a in session.scalars(select(Attempt).where(
                           Attempt.job_id == job_id, Attempt.kind == "generate"))]
        failures = [{"kind": a.kind, "candidate_id": a.candidate_id,
                     "reason": (a.result or {}).get("reason"),
                     "message": str((a.result or {}).get("message") or "")[:400]}
                    for a in session.scalars(select(Attempt).where(
                        Attempt.job_id == job_id, Attempt.kind.in_(("compile", "profile"))))
                    if not (a.result or {}).get("ok")]
    engine.dispose()
    return {"candidates": candidates, "generations": generations, "failures": failures}


def run_optimize_step(examples: list[Path], target: str, budget: int, work: Path,
                      deadline_s: float, job_wall_s: float | None,
                      policies: tuple[str, ...] = POLICIES) -> list[dict[str, Any]]:
    """Examples x policies in order until `deadline_s` (seconds from now) would be passed."""
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    for example in examples:
        for policy in policies:
            elapsed = time.monotonic() - started
            if job_wall_s is not None and elapsed + job_wall_s > deadline_s:
                rows.append({"example": example.stem, "policy": policy, "status": "not run",
                             "reason": f"validation deadline ({deadline_s:.0f}s) reached"})
                continue
            data_dir = work / f"{example.stem}_{policy}"
            try:
                row = run_job(example, policy, target, budget, data_dir, job_wall_s)
            except Exception as exc:  # one broken job must not hide the others
                row = {"example": example.stem, "policy": policy, "status": "error",
                       "reason": f"{type(exc).__name__}: {str(exc)[:400]}"}
            print(f"[optimize] {example.stem}/{policy}: {row.get('status')} "
                  f"speedup={row.get('best_speedup')} iters={row.get('iterations_done')} "
                  f"({row.get('wall_s')} s) {str(row.get('reason') or '')[:160]}", flush=True)
            rows.append(row)
    return rows
