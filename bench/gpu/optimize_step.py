"""Embedded `kernelband optimize` (rules generator) per example and policy on the GPU's target,
and every recorded (parent, strategy, child) read back from the job's database."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

POLICIES = ("kernelband", "random", "ucb1")


def run_job(example: Path, policy: str, target: str, budget: int, data_dir: Path,
            wall_s: float | None, seed: int = 0) -> dict[str, Any]:
    """One embedded job, exactly what `kernelband optimize FILE --target T --policy P` runs."""
    from kernelband.config import Settings
    from kernelband.sandbox import load_problem_sandboxed
    from kernelband.scheduling.embedded import JobOptions, run_local_job

    problem = load_problem_sandboxed(example.read_text(), "native", example.stem)
    settings = Settings(data_dir=data_dir)
    options = JobOptions(targets=(target,), policy=policy, budget=budget, parallel=2, seed=seed,
                         budget_wall_s=wall_s)
    outcome = run_local_job(settings, problem, options)
    track = outcome.tracks[0]
    return {
        "example": example.stem, "policy": policy, "target": target, "budget": budget, "seed": seed,
        "status": outcome.status, "reason": outcome.reason, "wall_s": round(outcome.wall_s, 1),
        "iterations_done": track.iterations_done, "original_ms": track.original_time_ms,
        "best_ms": track.best_time_ms, "best_speedup": track.best_speedup, "label": track.label,
        "held_out": track.held_out, "lineage": list(track.lineage), "attempts": outcome.attempts,
        "stages": [s.to_dict() for s in outcome.stages],
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
                      policies: tuple[str, ...] = POLICIES, seeds: tuple[int, ...] = (0,),
                      scaled: bool = False) -> list[dict[str, Any]]:
    """Seeds x examples x policies in order until `deadline_s` (seconds from now) would be passed.

    `scaled`: each example is replaced by a scaled copy (bench/gpu/scaled.py) under `work`.
    """
    started = time.monotonic()
    cases: dict[str, dict[str, Any]] = {}
    if scaled:
        from bench.gpu.scaled import write_scaled_examples

        copies = write_scaled_examples(examples, work / "scaled_examples")
        examples = [path for path, _ in copies]
        cases = {path.stem: info for path, info in copies}
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        for example in examples:
            for policy in policies:
                row = _one_job(example, policy, seed, target, budget, work, job_wall_s,
                               deadline_s - (time.monotonic() - started))
                rows.append(row | ({"mode": "scaled", "cases": cases[example.stem]}
                                   if scaled else {}))
    return rows


def _one_job(example: Path, policy: str, seed: int, target: str, budget: int, work: Path,
             job_wall_s: float | None, left_s: float) -> dict[str, Any]:
    """One job, or a `not run` row when it would not fit the time left."""
    if job_wall_s is not None and job_wall_s > left_s:
        return {"example": example.stem, "policy": policy, "seed": seed, "status": "not run",
                "reason": f"validation deadline reached ({left_s:.0f}s left)"}
    data_dir = work / f"{example.stem}_{policy}_s{seed}"
    try:
        row = run_job(example, policy, target, budget, data_dir, job_wall_s, seed)
    except Exception as exc:  # one broken job must not hide the others
        row = {"example": example.stem, "policy": policy, "seed": seed, "status": "error",
               "reason": f"{type(exc).__name__}: {str(exc)[:400]}"}
    print(f"[optimize] {example.stem}/{policy}/s{seed}: {row.get('status')} "
          f"speedup={row.get('best_speedup')} iters={row.get('iterations_done')} "
          f"({row.get('wall_s')} s) {str(row.get('reason') or '')[:160]}", flush=True)
    return row
