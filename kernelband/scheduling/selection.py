"""Selection: each running track's policy picks new pulls for its free slots, fairly shared.

Free slots (parallelism minus pulls in flight, bounded by the iteration budget) are ordered
round-robin between teams, then jobs (`fairshare`); a team's slots beyond its in-flight cap
are dropped. Each pull is committed as a pending generate attempt with its decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from kernelband.db.models import Attempt, Job, Track
from kernelband.loop.translate import new_pull
from kernelband.scheduling.attempts import ACTIVE_ATTEMPT_STATES
from kernelband.scheduling.budgets import budget_reason
from kernelband.scheduling.events import append_event, read_event_counters
from kernelband.scheduling.fairshare import cap_per_team, fair_order
from kernelband.scheduling.state import load_state, policy_for, save_state


def select_pulls(session: Session, now: datetime, cap: int | None = None,
                 limit: int | None = None) -> int:
    """Ask each running track's policy for new pulls while it has free capacity and budget.

    Every free slot is one item: slots are ordered round-robin between teams, then jobs
    (kernelband/scheduling/fairshare.py), and a team's slots beyond `cap` attempts in flight are dropped.
    Inside a team, jobs with fewer pulls in flight come first, so a pass that stops after
    `limit` pulls leaves the rest to the next pass without starving any job.
    """
    query = (select(Track, Job).join(Job, Job.id == Track.job_id)
             .where(Track.status == "running", Job.status == "running",
                    Job.cancel_requested.is_(False)).order_by(Track.id))
    slots: list[tuple[Track, Job]] = []
    rows = session.execute(query).all()
    in_flight_pulls = pulls_in_flight_by_track(session, [track.id for track, _ in rows])
    for track, job in rows:
        if budget_reason(job, now):
            continue
        free = job.parallelism - in_flight_pulls.get(track.id, 0)
        free = min(free, job.budget_iterations - track.iterations_dispatched)
        slots.extend([(track, job)] * max(free, 0))
    in_flight = in_flight_by_team(session)
    rank = job_rank(rows, in_flight_pulls)
    ordered = fair_order(slots, lambda r: r[1].team_id, lambda r: rank[r[1].id], in_flight)
    kept = cap_per_team(ordered, lambda r: r[1].team_id, in_flight, cap)[:limit]
    per_track: dict[int, tuple[Track, Job, int]] = {}
    for track, job in kept:  # dict order = first slot of each track in the fair order
        count = per_track.get(track.id, (track, job, 0))[2]
        per_track[track.id] = (track, job, count + 1)
    read_event_counters(session, (job.id for _, job, _ in per_track.values()))
    return sum(select_for_track(session, job, track, count)
               for track, job, count in per_track.values())


def job_rank(rows: Sequence[Any], in_flight_pulls: dict[int, int]) -> dict[int, int]:
    """Each job's turn inside its team (rows of (track, job)): fewest pulls in flight first,
    then the oldest job."""
    per_job: dict[int, int] = {}
    for track, job in rows:
        per_job[job.id] = per_job.get(job.id, 0) + in_flight_pulls.get(track.id, 0)
    ordered = sorted(per_job, key=lambda job_id: (per_job[job_id], job_id))
    return {job_id: position for position, job_id in enumerate(ordered)}


def pulls_in_flight_by_track(session: Session, track_ids: list[int]) -> dict[int, int]:
    """Open pulls per track in one grouped query (`pulls_in_flight` for many tracks)."""
    if not track_ids:
        return {}
    query = (select(Attempt.track_id, func.count(Attempt.id))
             .where(Attempt.track_id.in_(track_ids), Attempt.decision_id.is_not(None),
                    Attempt.state.in_(ACTIVE_ATTEMPT_STATES)).group_by(Attempt.track_id))
    return {int(track): int(count) for track, count in session.execute(query).all()}


def select_for_track(session: Session, job: Job, track: Track, count: int) -> int:
    """`count` decisions from the policy, each recorded as a pending generate attempt."""
    policy = policy_for(job)
    state = before = load_state(track)
    for _ in range(count):
        decision, state = policy.select(state)
        seed = job.seed * 100_003 + track.iterations_dispatched  # reproducible per pull
        ref = {"strategy": decision.strategy, "cluster": decision.cluster, "seed": seed}
        step = new_pull(session, job, track, decision, ref)  # a translate step on a placeholder
        track.iterations_dispatched += 1
        append_event(session, job.id, "pull_selected",
                     {"target": track.target, **decision.to_dict(), **step})
    save_state(session, track, state, before)
    return count


def in_flight_by_team(session: Session) -> dict[int, int]:
    """Open attempts (pending, dispatched or awaiting re-send) per team."""
    query = (select(Job.team_id, func.count(Attempt.id)).join(Job, Job.id == Attempt.job_id)
             .where(Attempt.state.in_(ACTIVE_ATTEMPT_STATES)).group_by(Job.team_id))
    return {int(team): int(count) for team, count in session.execute(query).all()}


__all__ = ["in_flight_by_team", "job_rank", "pulls_in_flight_by_track", "select_for_track",
           "select_pulls"]
