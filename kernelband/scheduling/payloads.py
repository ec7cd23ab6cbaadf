"""Task payloads: the complete, self-contained message of each attempt (workers have no DB).

`task_payloads` builds them for a whole dispatch batch with one query of plain columns per
table (ORM rows only for the generation context of LLM jobs); the generate payload carries
the parent's labelled profile facts (`profile_summary`) and the generation context of
kernelband.loop (memory, example, repair turn).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Row, bindparam, select, true
from sqlalchemy.orm import Session, aliased

from kernelband.bandit import POLICIES
from kernelband.db.models import Candidate, Job, Measurement, Problem, Track
from kernelband.db.repository import latest_measurements
from kernelband.loop.context import generation_context, needs_generation_context
from kernelband.scheduling.attempts import ClaimedAttempt
from kernelband.scheduling.candidate_facts import (
    CandidateFacts,
    HeldCandidates,
    known_facts,
    note_facts,
)
from kernelband.scheduling.state import WITHOUT_STORED_STATE

PHI_FACTS = (("log1p(time)", ""), ("registers per thread", ""), ("shared memory", "KiB"),
             ("log2(threads per block)", ""), ("theoretical occupancy", "%"))
H_FACTS = ("SM throughput", "DRAM throughput", "L2 throughput")
_PARENT = aliased(Candidate)
MAX_FACTS = 4096  # rows per table; past it a table's facts are read afresh


@dataclass
class PayloadFacts:
    """Columns that never change once set, kept by one engine context so that a dispatch
    reads them once per job rather than once per pass: a job's problem, limits, model, policy
    and generator, a problem's loaded form, a track's target and (once its baseline is
    measured, `ingest.apply_baseline`) its original time; and the candidates' columns this
    context wrote or read (`candidate_facts`). Held per context, not per process: a database
    whose ids start over (tests) gets a new context."""

    jobs: dict[int, Row[Any]] = field(default_factory=dict)
    problems: dict[int, Row[Any]] = field(default_factory=dict)
    tracks: dict[int, Row[Any]] = field(default_factory=dict)
    candidates: HeldCandidates = field(default_factory=HeldCandidates)


def profile_summary(measurement: Measurement | Row[Any] | None) -> list[dict[str, Any]]:
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


def task_payloads(session: Session, attempts: Sequence[ClaimedAttempt],
                  facts: PayloadFacts | None = None) -> list[dict[str, Any]]:
    """The complete, self-contained message payload of each attempt (workers have no DB).

    The rows they need are read as plain columns, one query per table for the whole batch,
    before any payload is built, so nothing is read (or flushed) once per attempt. Only the
    generate attempts of LLM jobs load ORM rows (their generation context reads the lineage).
    """
    if not attempts:
        return []
    facts = facts or PayloadFacts()
    jobs = _kept(facts.jobs, _JOB_FACTS, session, {a.job_id for a in attempts})
    tracks = _kept(facts.tracks, _TRACK_FACTS, session, {a.track_id for a in attempts},
                   lambda row: row.original_time_ms is not None)
    problems = _kept(facts.problems, _PROBLEM_FACTS, session,
                     {j.problem_id for j in jobs.values()})
    candidates, newest = _candidates(session, attempts)
    with_context = [a for a in attempts if a.kind == "generate" and a.candidate_id
                    and _needs_context(jobs[a.job_id])]
    # The identity map holds rows weakly: `held` keeps them there while payloads are built.
    held = [_rows(session, Job, {a.job_id for a in with_context}),
            _rows(session, Track, {a.track_id for a in with_context}, WITHOUT_STORED_STATE),
            _rows(session, Candidate, {a.candidate_id for a in with_context if a.candidate_id})]
    payloads = [_payload(session, attempt, jobs[attempt.job_id], tracks[attempt.track_id],
                         problems[jobs[attempt.job_id].problem_id],
                         candidates.get(attempt.candidate_id or 0), newest)
                for attempt in attempts]
    del held
    return payloads


def _candidates(session: Session, attempts: Sequence[ClaimedAttempt]
                ) -> tuple[dict[int, CandidateFacts], dict[int, Any]]:
    """The attempts' candidates (with their parents' source) and the newest measurement of
    each generate attempt's candidate (the parent of the pull): those this context holds
    (`candidate_facts`) as held, the others read (and noted).

    On Postgres one query: each candidate's measurements are joined as an index probe per
    candidate (a lateral join kept one by `OFFSET 0`), newest first, so the first row of each
    candidate carries its newest measurement; elsewhere (SQLite: tests) two queries."""
    ids = {a.candidate_id for a in attempts if a.candidate_id}
    candidates = known_facts(session, ids)
    for facts in _read_candidates(session, ids - candidates.keys()):
        note_facts(session, facts)
        candidates[facts.id] = facts
    newest = {a.candidate_id: candidates[a.candidate_id].newest for a in attempts
              if a.kind == "generate" and a.candidate_id in candidates
              and candidates[a.candidate_id].newest is not None}
    return candidates, newest


def _read_candidates(session: Session, ids: set[int]) -> list[CandidateFacts]:
    """The facts of these candidates, read (none for no ids)."""
    if not ids:
        return []
    if session.get_bind().dialect.name != "postgresql":
        rows = _columns(session, ids, *_CANDIDATE_COLUMNS,
                        join=(_PARENT, _PARENT.id == Candidate.parent_id))
        measured = latest_measurements(session, ids)
        return [_facts(row, measured.get(key)) for key, row in rows.items()]
    found: dict[int, CandidateFacts] = {}
    for row in session.execute(_CANDIDATES_MEASURED, {"ids": sorted(ids)}):
        if row.id not in found:  # else an older measurement of a candidate already seen
            found[row.id] = _facts(row, row if row.measurement_id is not None else None)
    return list(found.values())


def _facts(row: Row[Any], newest: Any) -> CandidateFacts:
    return CandidateFacts(row.id, row.editable, row.parent_id, row.parent_editable,
                          row.static_features, newest)


def _needs_context(job: Row[Any]) -> bool:
    return needs_generation_context(job.generator, job.model)


def _columns(session: Session, ids: set[int], key: Any, *columns: Any,
             join: tuple[Any, Any] | None = None) -> dict[int, Row[Any]]:
    """Plain rows (`key`, *columns) by `key` for these ids, in one query (none for no ids)."""
    if not ids:
        return {}
    query = select(key, *columns).where(key.in_(sorted(ids)))
    if join is not None:
        query = query.outerjoin(*join)
    return {row[0]: row for row in session.execute(query)}


_JOB_FACTS = (Job.id, Job.problem_id, Job.limits, Job.model, Job.policy, Job.generator)
_TRACK_FACTS = (Track.id, Track.target, Track.original_time_ms)
_PROBLEM_FACTS = (Problem.id, Problem.loaded)
_CANDIDATE_COLUMNS = (Candidate.id, Candidate.editable, Candidate.parent_id,
                      _PARENT.editable.label("parent_editable"),
                      Candidate.static_profile["features"].label("static_features"))


_MEASURED = (select(Measurement.id.label("measurement_id"), Measurement.label,
                    Measurement.method, Measurement.features, Measurement.time_ms)
             .where(Measurement.candidate_id == Candidate.id).offset(0).lateral("measured"))
_CANDIDATES_MEASURED = (
    select(*_CANDIDATE_COLUMNS, *(c for c in _MEASURED.c))
    .outerjoin(_PARENT, _PARENT.id == Candidate.parent_id).outerjoin(_MEASURED, true())
    .where(Candidate.id.in_(bindparam("ids", expanding=True)))
    .order_by(Candidate.id, _MEASURED.c.measurement_id.desc()))


def _kept(kept: dict[int, Row[Any]], columns: Sequence[Any], session: Session, ids: set[int],
          final: Callable[[Row[Any]], bool] = lambda row: True) -> dict[int, Row[Any]]:
    """`_columns` for rows whose columns never change once `final`: those read before are
    taken from `kept`, the others read and kept once final."""
    read = _columns(session, ids - kept.keys(), *columns)
    if len(kept) + len(read) > MAX_FACTS:
        kept.clear()
    kept.update((key, row) for key, row in read.items() if final(row))
    return {key: row for key in ids
            if (row := kept[key] if key in kept else read.get(key)) is not None}


def _rows(session: Session, model: Any, ids: set[int], *options: Any) -> list[Any]:
    """The rows of `model` with these ids (one query with these loader options; none for no
    ids)."""
    if not ids:
        return []
    return list(session.scalars(select(model).where(model.id.in_(ids)).options(*options)))


def _payload(session: Session, attempt: ClaimedAttempt, job: Row[Any], track: Row[Any],
             problem: Row[Any], candidate: CandidateFacts | None,
             newest: dict[int, Any]) -> dict[str, Any]:
    payload: dict[str, Any] = {"attempt_id": attempt.id, "job_id": job.id, "target": track.target,
                               "problem": problem.loaded, **attempt.payload}
    if job.limits:  # the job's own sandbox limits (kernelband.sandbox.job_limits)
        payload["limits"] = dict(job.limits)
    if candidate is None:
        return payload
    if attempt.kind == "generate":
        payload.update(parent_editable=candidate.editable, model=job.model,
                       profile_summary=profile_summary(newest.get(candidate.id)))
        if _needs_context(job):
            payload.update(generation_context(session, attempt, session.get_one(Job, job.id),
                                              session.get_one(Candidate, candidate.id)))
        return payload
    payload["editable"] = candidate.editable
    if attempt.kind == "profile":  # the class says it; no need to build the job's policy
        payload["hardware_signature"] = POLICIES[job.policy].policy.reads_signature
    if attempt.kind == "profile" and candidate.parent_id is not None:
        payload["parent_editable"] = candidate.parent_editable
    if attempt.kind == "profile" and isinstance(candidate.static_features, dict):
        # phi and the estimated h for this target, from the compile step: a GPU node that takes
        # no Nsight Compute pass then needs no features pass in the candidate's runner either
        payload["static_features"] = candidate.static_features
    if attempt.kind in ("profile", "verify") and track.original_time_ms:
        # a paired measurement's time is this baseline over its speedup against the original
        # (verify: the final re-measure of the best)
        payload["baseline_ms"] = track.original_time_ms
    return payload


__all__ = ["PayloadFacts", "latest_measurements", "profile_summary", "task_payloads"]
