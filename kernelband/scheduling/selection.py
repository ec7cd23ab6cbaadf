"""Selection: each running track's policy picks new pulls for its free slots, fairly shared.

Free slots (parallelism minus pulls in flight, bounded by the iteration budget) are ordered
round-robin between teams, then jobs (`fairshare`); a team's slots beyond its in-flight cap
are dropped. Each pull is committed as a pending generate attempt with its decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from kernelband.db.models import Attempt, Job, Track
from kernelband.loop.translate import new_pull
from kernelband.scheduling.attempts import ACTIVE_ATTEMPT_STATES
from kernelband.scheduling.budgets import budget_reason
from kernelband.scheduling.events import append_event, read_event_counters
from kernelband.scheduling.fairshare import cap_per_team, fair_order
from kernelband.scheduling.state import WITHOUT_STORED_STATE, load_state, policy_for, save_state


def select_pulls(session: Session, now: datetime, cap: int | None = None,
                 limit: int | None = None) -> int:
    """Ask each running track's policy for new pulls while it has free capacity and budget.

    Every free slot is one item: slots are ordered round-robin between teams, then jobs
    (kernelband/scheduling/fairshare.py), and a team's slots beyond `cap` attempts in flight are dropped.
    Inside a team, jobs with fewer pulls in flight come first, so a pass that stops after
    `limit` pulls leaves the rest to the next pass without starving any job.
    """
    rows = tracks_with_free_slots(session)
    slots: list[tuple[Track, Job]] = []
    for track, job, pulls, _ in rows:
        if budget_reason(job, now):
            continue
        free = min(job.parallelism - pulls, job.budget_iterations - track.iterations_dispatched)
        slots.extend([(track, job)] * max(free, 0))
    in_flight = in_flight_by_team(session)
    rank = job_rank(rows)
    ordered = fair_order(slots, lambda r: r[1].team_id, lambda r: rank[r[1].id], in_flight)
    kept = cap_per_team(ordered, lambda r: r[1].team_id, in_flight, cap)[:limit]
    per_track: dict[int, tuple[Track, Job, int]] = {}
    for track, job in kept:  # dict order = first slot of each track in the fair order
        count = per_track.get(track.id, (track, job, 0))[2]
        per_track[track.id] = (track, job, count + 1)
    read_event_counters(session, (job.id for _, job, _ in per_track.values()))
    return sum(select_for_track(session, job, track, count)
               for track, job, count in per_track.values())


def tracks_with_free_slots(session: Session) -> list[tuple[Track, Job, int, int]]:
    """(track, job, its pulls in flight, its job's pulls in flight) of every running track with
    a free slot (parallelism and iteration budget), in one query; full tracks are not loaded."""
    open_pulls = (select(Attempt.track_id, func.count(Attempt.id).label("pulls"))
                  .where(Attempt.decision_id.is_not(None), Attempt.state.in_(ACTIVE_ATTEMPT_STATES))
                  .group_by(Attempt.track_id).subquery())
    pulls = func.coalesce(open_pulls.c.pulls, 0)
    running = (select(Track.id.label("track_id"), pulls.label("pulls"),
                      func.sum(pulls).over(partition_by=Track.job_id).label("job_pulls"))
               .join(Job, Job.id == Track.job_id)
               .outerjoin(open_pulls, open_pulls.c.track_id == Track.id)
               .where(Track.status == "running", Job.status == "running",
                      Job.cancel_requested.is_(False))
               .subquery())
    query = (select(Track, Job, running.c.pulls, running.c.job_pulls)
             .join(running, running.c.track_id == Track.id).join(Job, Job.id == Track.job_id)
             .where(running.c.pulls < Job.parallelism,
                    Track.iterations_dispatched < Job.budget_iterations)
             .order_by(Track.id).options(WITHOUT_STORED_STATE))
    return [(track, job, int(pulls), int(job_pulls))
            for track, job, pulls, job_pulls in session.execute(query).all()]


def job_rank(rows: Sequence[tuple[Track, Job, int, int]]) -> dict[int, int]:
    """Each job's turn inside its team (rows of `tracks_with_free_slots`): fewest pulls in
    flight over all its running tracks first, then the oldest job."""
    per_job = {job.id: job_pulls for _, job, _, job_pulls in rows}
    ordered = sorted(per_job, key=lambda job_id: (per_job[job_id], job_id))
    return {job_id: position for position, job_id in enumerate(ordered)}


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


__all__ = ["in_flight_by_team", "job_rank", "select_for_track",
           "select_pulls", "tracks_with_free_slots"]
