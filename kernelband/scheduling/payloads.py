"""Task payloads: the complete, self-contained message of each attempt (workers have no DB).

`task_payloads` builds them for a whole dispatch batch with one query per table; the generate
payload carries the parent's labelled profile facts (`profile_summary`) and the generation
context of kernelband.loop (memory, example, repair turn).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.bandit import POLICIES
from kernelband.db.models import Candidate, Job, Measurement, Problem, Track
from kernelband.scheduling.attempts import ClaimedAttempt
from kernelband.scheduling.state import WITHOUT_STORED_STATE


def latest_measurements(session: Session, candidate_ids: Iterable[int]) -> dict[int, Measurement]:
    """The newest measurement of each candidate that has one, in one query."""
    ids = sorted(set(candidate_ids))
    if not ids:
        return {}
    query = (select(Measurement).where(Measurement.candidate_id.in_(ids))
             .order_by(Measurement.candidate_id, Measurement.id.desc()))
    newest: dict[int, Measurement] = {}
    for measurement in session.scalars(query):
        newest.setdefault(measurement.candidate_id, measurement)
    return newest


PHI_FACTS = (("log1p(time)", ""), ("registers per thread", ""), ("shared memory", "KiB"),
             ("log2(threads per block)", ""), ("theoretical occupancy", "%"))
H_FACTS = ("SM throughput", "DRAM throughput", "L2 throughput")


def profile_summary(measurement: Measurement | None) -> list[dict[str, Any]]:
    """The parent's labelled profile facts for the prompt (GenerationRequest.profile_summary)."""
    if measurement is None:
        return []
    facts = [{"label": "time", "value": measurement.time_ms, "unit": "ms",
              "source": f"{measurement.label}, {measurement.method}"}]
    features = measurement.features or {}
    phi, phi_sources = features.get("phi") or [], features.get("phi_sources") or []
    for index, (value, (label, unit)) in enumerate(zip(phi, PHI_FACTS, strict=False)):
        if index == 0:
            continue  # the time is already stated
        source = phi_sources[index] if index < len(phi_sources) else "unknown"
        facts.append({"label": label, "value": float(value), "unit": unit, "source": source})
    h, h_sources = features.get("h") or [], features.get("h_sources") or []
    for index, (value, label) in enumerate(zip(h, H_FACTS, strict=False)):
        source = h_sources[index] if index < len(h_sources) else "unknown"
        facts.append({"label": label, "value": float(value), "unit": "% of peak",
                      "source": source})
    return facts


def task_payloads(session: Session, attempts: Sequence[ClaimedAttempt]) -> list[dict[str, Any]]:
    """The complete, self-contained message payload of each attempt (workers have no DB).

    The rows they need are read in one query per table for the whole batch, before any
    payload is built, so nothing is read (or flushed) once per attempt.
    """
    candidate_ids = {a.candidate_id for a in attempts if a.candidate_id is not None}
    jobs = _rows(session, Job, {a.job_id for a in attempts})
    candidates = _rows(session, Candidate, candidate_ids)
    # A compile payload carries the child alone; profile (parent's code) and generate (lineage
    # memory) payloads read the candidate's parent too.
    with_parent = {a.candidate_id for a in attempts if a.kind != "compile"}
    parent_ids = {c.parent_id for c in candidates
                  if c.parent_id is not None and c.id in with_parent} - candidate_ids
    # The identity map holds rows weakly: `held` keeps them there while payloads are built.
    held = [jobs, candidates,
            _rows(session, Track, {a.track_id for a in attempts}, WITHOUT_STORED_STATE),
            _rows(session, Problem, {j.problem_id for j in jobs}),
            _rows(session, Candidate, parent_ids)]
    newest = latest_measurements(session, (a.candidate_id for a in attempts
                                           if a.kind == "generate" and a.candidate_id))
    payloads = [_payload(session, attempt, newest) for attempt in attempts]
    del held
    return payloads


def _rows(session: Session, model: Any, ids: set[int], *options: Any) -> list[Any]:
    """The rows of `model` with these ids (one query with these loader options; none for no
    ids)."""
    if not ids:
        return []
    return list(session.scalars(select(model).where(model.id.in_(ids)).options(*options)))


def _payload(session: Session, attempt: ClaimedAttempt,
             newest: dict[int, Measurement]) -> dict[str, Any]:
    track = session.get_one(Track, attempt.track_id)
    job = session.get_one(Job, attempt.job_id)
    problem = session.get_one(Problem, job.problem_id)
    candidate = session.get(Candidate, attempt.candidate_id) if attempt.candidate_id else None
    payload: dict[str, Any] = {"attempt_id": attempt.id, "job_id": job.id, "target": track.target,
                               "problem": problem.loaded, **attempt.payload}
    if job.limits:  # the job's own sandbox limits (kernelband.sandbox.job_limits)
        payload["limits"] = dict(job.limits)
    if candidate is None:
        return payload
    if attempt.kind == "generate":
        from kernelband.loop.context import generation_context  # the loop reads these helpers

        payload.update(parent_editable=candidate.editable, model=job.model,
                       profile_summary=profile_summary(newest.get(candidate.id)))
        payload.update(generation_context(session, attempt, job, candidate))
        return payload
    payload["editable"] = candidate.editable
    if attempt.kind == "profile":  # the class says it; no need to build the job's policy
        payload["hardware_signature"] = POLICIES[job.policy].policy.reads_signature
    if attempt.kind == "profile" and candidate.parent_id is not None:
        parent = session.get(Candidate, candidate.parent_id)
        payload["parent_editable"] = parent.editable if parent else None
    return payload


__all__ = ["latest_measurements", "profile_summary", "task_payloads"]
