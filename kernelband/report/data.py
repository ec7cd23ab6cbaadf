"""What a report shows, read from the database (embedded) or a server's JSON API: one shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.db.models import ArmStat, Candidate, Job, Measurement, Problem, Track
from kernelband.speedups import of_measurement, of_track


class ReportError(RuntimeError):
    """The job could not be read; the message says what to do."""


@dataclass(frozen=True)
class ReportData:
    """A job (JobOut-like dict), its candidates (CandidateOut-like) and arms per target."""

    job: dict[str, Any]
    candidates: list[dict[str, Any]]
    arms: dict[str, list[dict[str, Any]]]
    sources: dict[int, str] = field(default_factory=dict)  # best and original regions (DB only)


def from_server(url: str, token: str, job_id: int | str,
                timeout_s: float = 30.0) -> ReportData:
    """Read the job through the REST API with a team token."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout_s) as client:
        job = _get(client, f"/v1/jobs/{job_id}")
        candidates: list[dict[str, Any]] = []
        while True:
            page = _get(client, f"/v1/jobs/{job_id}/candidates?limit=1000&offset={len(candidates)}")
            candidates += page["candidates"]
            if len(page["candidates"]) < 1000:
                break
        arms = {t: _get(client, f"/v1/jobs/{job_id}/tracks/{t}/bandit")["arms"]
                for t in job["targets"]}
    return ReportData(job=job, candidates=candidates, arms=arms)


def _get(client: httpx.Client, path: str) -> Any:
    try:
        response = client.get(path)
    except httpx.HTTPError as exc:
        raise ReportError(f"cannot reach {client.base_url}: {exc}; check --server") from exc
    if response.status_code != 200:
        detail = response.json().get("message", response.text) if response.content else ""
        raise ReportError(f"GET {path} answered {response.status_code}: {detail}")
    return response.json()


def from_database(session: Session, job_id: int) -> ReportData:
    """Read the job straight from the database (embedded mode; no team scoping)."""
    job = session.get(Job, job_id)
    if job is None:
        raise ReportError(f"job {job_id} is not in this database; check the id or pass "
                          "--server URL --token T to read it from a service")
    problem = session.get_one(Problem, job.problem_id)
    tracks = {t.target: t for t in session.scalars(select(Track).where(Track.job_id == job.id))}
    rows = session.execute(select(Candidate, Track).join(Track, Track.id == Candidate.track_id)
                           .where(Track.job_id == job.id).order_by(Candidate.id)).all()
    ms: dict[int, list[Measurement]] = {c.id: [] for c, _ in rows}
    if ms:
        query = select(Measurement).where(Measurement.candidate_id.in_(list(ms)))
        for m in session.scalars(query.order_by(Measurement.id)):
            ms[m.candidate_id].append(m)
    candidates = [_candidate(c, t, ms[c.id]) for c, t in rows]
    arms = {target: [_arm(a) for a in session.scalars(
        select(ArmStat).where(ArmStat.track_id == track.id)
        .order_by(ArmStat.cluster, ArmStat.strategy))] for target, track in tracks.items()}
    wanted = {i for t in tracks.values() for i in (t.best_candidate_id, t.original_candidate_id)}
    sources = {c.id: c.editable for c, _ in rows if c.id in wanted}
    return ReportData(job=_job(job, problem, tracks, ms), candidates=candidates, arms=arms,
                      sources=sources)


def _job(job: Job, problem: Problem, tracks: dict[str, Track],
         ms: dict[int, list[Measurement]]) -> dict[str, Any]:
    out = []
    for target in job.targets:
        t = tracks.get(target)
        if t is None:
            out.append({"target": target, "status": "pending", "iterations_done": 0, "best": None})
            continue
        best_ms = ms.get(t.best_candidate_id or -1) or []
        m = best_ms[-1] if best_ms else None
        shown = of_track(t)
        best = None if t.best_candidate_id is None else {
            "candidate_id": t.best_candidate_id, **shown.fields(), "speedup_text": shown.text(),
            "speedup_final": bool(t.best_speedup_final),
            "time_ms": t.best_time_ms, "label": t.best_label or (m.label if m else None),
            "device": m.device if m else None, "method": m.method if m else None}
        out.append({"target": target, "status": t.status, "iterations_done": t.iterations_done,
                    "original_time_ms": t.original_time_ms, "best": best,
                    "held_out": t.held_out, "reason": t.held_out_reason or t.reason})
    return {"id": job.id, "status": job.status, "problem": {"name": problem.name},
            "targets": list(job.targets), "policy": job.policy, "model": job.model,
            "generator": job.generator, "budget": {"iterations": job.budget_iterations},
            "reason": job.reason, "tracks": out,
            "spend": {"tokens": job.tokens_used, "usd": job.cost_usd, "usd_known": job.cost_known,
                      "iterations": sum(int(t["iterations_done"]) for t in out)}}


def _candidate(c: Candidate, t: Track, ms: list[Measurement]) -> dict[str, Any]:
    """Shaped like the API's CandidateOut: each measurement's speedup is the paired one with
    its interval, an estimate's ratio, or none (never two unpaired times divided)."""
    def measurement(m: Measurement) -> dict[str, Any]:
        shown = of_measurement(m, t.original_time_ms, is_original=c.id == t.original_candidate_id)
        return {"target": m.target, "label": m.label, "method": m.method, "device": m.device,
                "time_ms": m.time_ms, **shown.fields(), "speedup_text": shown.text()}

    return {"id": c.id, "target": t.target, "parent_id": c.parent_id,
            "lineage_depth": c.lineage_depth, "strategy": c.strategy, "status": c.status,
            "reason": c.reason, "measurements": [measurement(m) for m in ms]}


def _arm(a: ArmStat) -> dict[str, Any]:
    return {"cluster": a.cluster, "strategy": a.strategy, "pulls": a.pulls,
            "mean_reward": a.mean_reward, "masked": a.masked, "ucb_score": a.ucb_score}
