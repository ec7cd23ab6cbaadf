"""Helpers of the scheduler steps: fencing, events, policy state, budgets, payloads, views."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, object_session

from kernelband.bandit import POLICIES, FrontierEntry, PolicyState, make_policy
from kernelband.bandit.policy import Policy
from kernelband.db.models import (
    Attempt,
    Candidate,
    Event,
    FrontierRow,
    Job,
    LeaderEpoch,
    Measurement,
    Problem,
    Track,
    utcnow,
)
from kernelband.dispatch import queue_for
from kernelband.engine_state import cached_state, remember_state
from kernelband.engine_views import deferred_writes, touch_job

ACTIVE_ATTEMPT_STATES = ("pending", "dispatched", "expired")


class FencingError(RuntimeError):
    """This scheduler is no longer the leader; its transaction was rolled back."""


def as_utc(moment: datetime) -> datetime:
    """SQLite returns naive datetimes; they were written as UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def claim_leadership(session: Session, holder: str) -> int:
    """Bump the leader epoch (call right after taking the advisory lock); returns the new one."""
    row = session.get(LeaderEpoch, 1, with_for_update=True)
    if row is None:
        row = LeaderEpoch(id=1, epoch=0, holder=holder)
        session.add(row)
    row.epoch += 1
    row.holder = holder
    row.updated_at = utcnow()
    session.flush()
    return row.epoch


def verify_epoch(session: Session, leader_epoch: int | None) -> None:
    """Refuse to write unless `leader_epoch` is still current; None means embedded (no fence)."""
    if leader_epoch is None:
        return
    # FOR SHARE holds the row until commit, so a new leader's bump waits for this transaction.
    query = select(LeaderEpoch.epoch).where(LeaderEpoch.id == 1).with_for_update(read=True)
    current = session.execute(query).scalar_one_or_none()
    if current != leader_epoch:
        raise FencingError(
            f"leader epoch is {current}, this scheduler holds {leader_epoch}: another scheduler "
            "took over; stop writing and wait for the lock again"
        )


def append_event(session: Session, job_id: int, kind: str, payload: dict[str, Any]) -> Event:
    """Append an event with the next sequence number of the job.

    The job's last number is read once per transaction and counted on in memory, so several
    events of one transaction are inserted together at its next flush. Only the fenced leader
    appends events, one transaction at a time; the unique (job_id, seq) constraint backs that.
    """
    counters = _event_counters(session)
    last = counters.get(job_id)
    if last is None:
        last = session.execute(select(func.max(Event.seq)).where(Event.job_id == job_id)).scalar()
    counters[job_id] = (last or 0) + 1
    event = Event(job_id=job_id, seq=counters[job_id], kind=kind, payload=payload)
    session.add(event)
    touch_job(session, job_id)
    return event


_EVENT_COUNTERS = "kb_event_counters"


def read_event_counters(session: Session, job_ids: Iterable[int]) -> None:
    """Read the last event number of many jobs in one query (for `append_event`)."""
    ids = sorted(set(job_ids))
    if ids:
        query = (select(Event.job_id, func.max(Event.seq)).where(Event.job_id.in_(ids))
                 .group_by(Event.job_id))
        found = {int(job): int(seq) for job, seq in session.execute(query).all()}
        prime_event_counters(session, {job: found.get(job, 0) for job in ids})


def prime_event_counters(session: Session, last: dict[int, int]) -> None:
    """Jobs' last event numbers, read along with other rows, so `append_event` need not ask."""
    counters = _event_counters(session)
    for job_id, seq in last.items():  # never behind what this transaction already counted
        counters[job_id] = max(counters.get(job_id, 0), seq)


def _event_counters(session: Session) -> dict[int, int]:
    """Last event number per job, valid for the session's current transaction only."""
    transaction = session.get_transaction()
    held = session.info.get(_EVENT_COUNTERS)
    if held is None or held[0] is not transaction:
        held = session.info[_EVENT_COUNTERS] = (transaction, {})
    counters: dict[int, int] = held[1]
    return counters


def policy_for(job: Job) -> Policy:
    """The job's policy object (pure; configuration only)."""
    return make_policy(job.policy, dict(job.policy_params or {}))


def load_state(track: Track) -> PolicyState:
    """The track's policy state: the parsed committed copy when cached, else its stored rows."""
    session = object_session(track)
    cached = cached_state(session, track) if session is not None else None
    if cached is not None:
        return cached
    if track.policy_state is None:
        raise RuntimeError(f"track {track.id} has no policy state yet (baseline not measured)")
    if session is None:
        raise RuntimeError(f"track {track.id} is detached: its frontier rows cannot be read")
    query = (select(FrontierRow.entry).where(FrontierRow.track_id == track.id)
             .order_by(FrontierRow.position).limit(track.frontier_size))  # rows 0..size-1
    return PolicyState.from_dict({**track.policy_state, "frontier": list(session.scalars(query))})


def save_state(session: Session, track: Track, state: PolicyState,
               previous: PolicyState | None = None) -> None:
    """Store the state and refresh the derived arm/cluster view unless `previous` shows it same.

    The frontier only ever grows at its end, so only entries past the stored size are written;
    the rest of the state is one small JSON value.
    """
    stored = state.to_dict(frontier=False)
    size = track.frontier_size or 0
    if len(state.frontier) < size:
        raise RuntimeError(f"track {track.id}: a policy state may only append to its frontier")
    writes = deferred_writes(session)  # rows and views go out at commit, batched
    writes.frontier_rows += [{"track_id": track.id, "position": i, "entry": e.to_dict()}
                             for i, e in enumerate(state.frontier[size:], start=size)]
    track.policy_state = stored
    track.frontier_size = len(state.frontier)
    remember_state(session, track, state, stored)
    if previous is None or view_key(previous) != view_key(state):
        writes.views[track.id] = (track, session.get_one(Job, track.job_id), state)


def view_key(state: PolicyState) -> tuple[Any, ...]:
    """Everything the arm/cluster view is derived from (selecting a pull changes none of it)."""
    # Frontier entries are only ever appended, so its length stands for its content.
    return (state.t, state.arm_n, state.arm_mu, state.labels, state.n_clusters,
            state.centroids, len(state.frontier))


def budget_reason(job: Job, now: datetime) -> str | None:
    """Which job-wide budget (tokens, usd, wall time) is spent, or None."""
    if job.budget_tokens is not None and job.tokens_used >= job.budget_tokens:
        return f"token budget spent ({job.tokens_used} >= {job.budget_tokens})"
    if job.budget_usd is not None and job.cost_usd >= job.budget_usd:
        return f"cost budget spent (${job.cost_usd:.4f} >= ${job.budget_usd:.4f})"
    if job.budget_wall_s is not None and job.started_at is not None:
        elapsed = (now - as_utc(job.started_at)).total_seconds()
        if elapsed >= job.budget_wall_s:
            return f"wall-time budget spent ({elapsed:.0f}s >= {job.budget_wall_s:.0f}s)"
    return None


def pulls_in_flight(session: Session, track_id: int) -> int:
    """Pulls of the track whose current attempt is not finished."""
    query = select(func.count(Attempt.id)).where(
        Attempt.track_id == track_id, Attempt.decision_id.is_not(None),
        Attempt.state.in_(ACTIVE_ATTEMPT_STATES))
    return int(session.execute(query).scalar() or 0)


def active_attempts(session: Session, track_id: int) -> int:
    """Attempts of any kind (baseline and verification included) still open on the track."""
    query = select(func.count(Attempt.id)).where(
        Attempt.track_id == track_id, Attempt.state.in_(ACTIVE_ATTEMPT_STATES))
    return int(session.execute(query).scalar() or 0)


def new_attempt(session: Session, track: Track, kind: str, candidate_id: int | None,
                decision_id: str | None = None, ref: dict[str, Any] | None = None) -> Attempt:
    """A pending attempt; it is dispatched only after this transaction commits."""
    attempt = Attempt(job_id=track.job_id, track_id=track.id, kind=kind, state="pending",
                      candidate_id=candidate_id, decision_id=decision_id,
                      queue=queue_for(kind, track.target), payload=dict(ref or {}))
    session.add(attempt)  # inserted at the next flush, with the transaction's other rows
    return attempt


def fail_open_attempts(session: Session, track_id: int, reason: str) -> None:
    """Close every open attempt of a track (cancellation): late results are then ignored."""
    session.execute(
        update(Attempt)
        .where(Attempt.track_id == track_id, Attempt.state.in_(ACTIVE_ATTEMPT_STATES))
        .values(state="failed", reason=reason, finished_at=utcnow())
    )


def fail_open_pulls(session: Session, track_id: int, reason: str) -> None:
    """Close the open attempts of a track's pulls (not its baseline or verification)."""
    session.execute(
        update(Attempt)
        .where(Attempt.track_id == track_id, Attempt.decision_id.is_not(None),
               Attempt.state.in_(ACTIVE_ATTEMPT_STATES))
        .values(state="failed", reason=reason, finished_at=utcnow())
    )


def lease_deadline(now: datetime, lease_s: float) -> datetime:
    """When a dispatched attempt counts as lost."""
    return now + timedelta(seconds=lease_s)


def frontier_entry(candidate: Candidate, measurement: Measurement) -> FrontierEntry:
    """The bandit's view of a measured candidate."""
    features = measurement.features or {}
    h = features.get("h")
    return FrontierEntry(kernel_id=str(candidate.id), time_ms=measurement.time_ms,
                         phi=tuple(features.get("phi") or ()),
                         h=None if not h else (float(h[0]), float(h[1]), float(h[2])))


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


def task_payloads(session: Session, attempts: Sequence[Attempt]) -> list[dict[str, Any]]:
    """The complete, self-contained message payload of each attempt (workers have no DB).

    The rows they need are read in one query per table for the whole batch, before any
    payload is built, so nothing is read (or flushed) once per attempt.
    """
    candidate_ids = {a.candidate_id for a in attempts if a.candidate_id is not None}
    jobs = _rows(session, Job, {a.job_id for a in attempts})
    candidates = _rows(session, Candidate, candidate_ids)
    parent_ids = {c.parent_id for c in candidates if c.parent_id is not None} - candidate_ids
    # The identity map holds rows weakly: `held` keeps them there while payloads are built.
    held = [jobs, candidates, _rows(session, Track, {a.track_id for a in attempts}),
            _rows(session, Problem, {j.problem_id for j in jobs}),
            _rows(session, Candidate, parent_ids)]
    newest = latest_measurements(session, (a.candidate_id for a in attempts
                                           if a.kind == "generate" and a.candidate_id))
    payloads = [_payload(session, attempt, newest) for attempt in attempts]
    del held
    return payloads


def _rows(session: Session, model: Any, ids: set[int]) -> list[Any]:
    """The rows of `model` with these ids (one query; none for no ids)."""
    if not ids:
        return []
    return list(session.scalars(select(model).where(model.id.in_(ids))))


def _payload(session: Session, attempt: Attempt,
             newest: dict[int, Measurement]) -> dict[str, Any]:
    track = session.get_one(Track, attempt.track_id)
    job = session.get_one(Job, attempt.job_id)
    problem = session.get_one(Problem, job.problem_id)
    candidate = session.get(Candidate, attempt.candidate_id) if attempt.candidate_id else None
    payload: dict[str, Any] = {"attempt_id": attempt.id, "job_id": job.id, "target": track.target,
                               "problem": problem.loaded, **attempt.payload}
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
