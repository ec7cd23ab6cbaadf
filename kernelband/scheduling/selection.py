"""Selection: each running track's policy picks new pulls for its free slots, fairly shared.

Free slots (parallelism minus pulls in flight, bounded by the iteration budget) are ordered
round-robin between teams, then jobs (`fairshare`); a team's slots beyond its in-flight cap
are dropped (pulls in flight per team, from the track counters: `pulls_by_team`). Each pull is committed as a pending generate attempt with its decision.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import func, select
from sqlalchemy.orm import Session, object_session

from kernelband.bandit import PolicyState
from kernelband.db.models import Attempt, Job, Track
from kernelband.db.row_buffer import row_value
from kernelband.loop.translate import new_pull
from kernelband.scheduling.attempts import ACTIVE_ATTEMPT_STATES
from kernelband.scheduling.budgets import budget_reason
from kernelband.scheduling.events import append_event, hold_event_counters
from kernelband.scheduling.fairshare import cap_per_team, fair_order
from kernelband.scheduling.state import WITHOUT_STORED_STATE, load_state, policy_for, save_state
from kernelband.scheduling.state_cache import held_states, remember_state, saved_states


@dataclass
class TimeBudget:
    """How long a selection may go on choosing pulls once it has read which tracks have free
    slots and the rows of the first few (those reads are not counted; the rows of further
    tracks are, read in chunks as it goes); `spent` says it stopped because the time was up.

    The time is the scheduler thread's own CPU time: on a quiet core it is the wall time, and
    on a core shared with other processes a pass still does the same work (with a wall-clock
    bound the passes shrank to one track each while their fixed reads stayed, so the busier
    the machine the fewer pulls each pass's overhead paid for)."""

    seconds: float
    clock: Callable[[], float] = time.thread_time
    deadline: float = field(default=0.0, init=False)
    spent: bool = field(default=False, init=False)

    def start(self) -> None:
        self.deadline, self.spent = self.clock() + self.seconds, False

    def used(self) -> float:
        return self.clock() - (self.deadline - self.seconds)

    def left(self) -> float:
        return max(self.deadline - self.clock(), 0.0)

    def over(self) -> bool:
        self.spent = self.clock() >= self.deadline
        return self.spent


def select_pulls(session: Session, now: datetime, cap: int | None = None,
                 limit: int | None = None, budget: TimeBudget | None = None,
                 skip_teams: Collection[int] = ()) -> int:
    """Ask each running track's policy for new pulls while it has free capacity and budget.

    Every free slot is one item: slots are ordered round-robin between teams, then jobs
    (kernelband/scheduling/fairshare.py), and a team's slots beyond `cap` attempts in flight are dropped.
    Inside a team, jobs with fewer pulls in flight come first, so a pass that stops after
    `limit` pulls, or when its time `budget` is spent (checked after each track, so the first
    track in the fair order is always served), leaves the rest to the next pass without
    starving any job. Jobs of `skip_teams` (over a usage quota) get no pulls.

    The running tracks' read is all a pass reads: it carries the columns selection uses, and
    each track's policy state is the one this process holds for the row's version
    (`hot_states`), so no track or job row is loaded as an object (`track_value`).
    """
    running, hot = read_running(session)
    rows = with_free_slots(running)
    slots: list[RunningTrack] = []  # one row per free slot
    for row in rows:
        if row.team_id in skip_teams or budget_reason(row, now):
            continue
        free = min(row.parallelism - row.pulls, row.budget_iterations - row.iterations_dispatched)
        slots.extend([row] * max(free, 0))
    in_flight = pulls_by_team(running)
    rank = job_rank(rows)
    ordered = fair_order(slots, lambda r: r.team_id, lambda r: rank[r.job_id], in_flight)
    kept = cap_per_team(ordered, lambda r: r.team_id, in_flight, cap)[:limit]
    counts: dict[int, int] = {}
    served: dict[int, RunningTrack] = {}
    for row in kept:  # dict order = first slot of each track in the fair order
        counts[row.track_id] = counts.get(row.track_id, 0) + 1
        served[row.track_id] = row
    hold_event_counters(session, {row.job_id for row in served.values()})
    if budget is not None:
        budget.start()
    selected = 0
    for track_id, row in served.items():
        state, loaded = hot[track_id]
        track = loaded if loaded is not None else track_value(row)
        selected += select_for_track(session, job_value(row), track, counts[track_id], state)
        if budget is not None and budget.over():
            return selected
    return selected


def track_value(row: RunningTrack) -> Track:
    """The running track of `row` as a value no session holds, for selection to read: a track
    whose state is written back with this transaction is loaded as a row then
    (`state.write_back_saved`)."""
    return row_value(Track, {
        "id": row.track_id, "job_id": row.job_id, "target": row.target, "status": "running",
        "original_candidate_id": row.original_candidate_id,
        "best_candidate_id": row.best_candidate_id, "frontier_size": row.frontier_size,
        "version": row.version, "started_at": row.track_started_at})


def job_value(row: RunningTrack) -> Job:
    """The job of `row` as a value no session holds: the columns selection reads."""
    return row_value(Job, {
        "id": row.job_id, "team_id": row.team_id, "seed": row.seed, "policy": row.policy,
        "policy_params": row.policy_params, "generator": row.generator, "model": row.model,
        "problem_id": row.problem_id, "budget_iterations": row.budget_iterations,
        "parallelism": row.parallelism, "status": "running"})


def tracks_with_free_slots(session: Session) -> list[RunningTrack]:
    """A row per running track with a free slot (parallelism and iteration budget): its
    `track_id`, `job_id`, `team_id`, `parallelism`, `budget_iterations`,
    `iterations_dispatched`, its pulls in flight (`pulls`), its job's pulls in flight over all
    running tracks (`job_pulls`) and the job's budget fields."""
    return with_free_slots(running_tracks(session))


class RunningTrack(NamedTuple):
    """A running track of a running job, its counters as of this transaction (`hot_states`),
    with the columns selection reads. A named tuple: a pass builds one per running track, and a
    frozen dataclass cost four times as much to build."""

    track_id: int
    job_id: int
    team_id: int
    parallelism: int
    budget_iterations: int
    iterations_dispatched: int
    pulls: int  # selected and not finished
    job_pulls: int  # the job's pulls in flight over all its running tracks
    budget_tokens: int | None
    tokens_used: int
    budget_usd: float | None
    cost_usd: float
    budget_wall_s: float | None
    started_at: datetime | None  # the job's (`budget_reason`)
    # the track's
    target: str
    original_candidate_id: int | None
    best_candidate_id: int | None
    frontier_size: int
    version: int
    track_started_at: datetime | None
    # the job's, never changed once it is created
    seed: int
    policy: str
    policy_params: dict[str, Any] | None
    generator: str
    model: str
    problem_id: int


def running_tracks(session: Session) -> list[RunningTrack]:
    """Every running track of a running job as a row of `tracks_with_free_slots`."""
    return read_running(session)[0]


Hot = tuple[PolicyState, Track | None]  # a track's state, and its row when it had to be read


def read_running(session: Session) -> tuple[list[RunningTrack], dict[int, Hot]]:
    """Every running track of a running job (one read, as plain rows: the ORM's statement
    handling and row loading cost more than the read; what the session holds unflushed is
    flushed first, as the ORM's autoflush would), and each one's policy state."""
    if session.new or session.dirty or session.deleted:
        session.flush()
    # plain tuples, unpacked by position (`_RUNNING`'s column order): a pass reads every
    # running track, and a named attribute of a result row is a lookup by name each time
    rows = [tuple(row) for row in session.connection().execute(_RUNNING)]  # its order
    hot = hot_states(session, [(row[0], row[1], row[3], row[2]) for row in rows])
    per_job: dict[int, int] = {}
    for row in rows:
        state = hot[row[0]][0]
        per_job[row[1]] = per_job.get(row[1], 0) + state.next_decision - state.t
    out = []
    for (track_id, job_id, version, track_started_at, target, original_id, best_id, size,
         team_id, parallelism, budget_iterations, budget_tokens, tokens_used, budget_usd,
         cost_usd, budget_wall_s, started_at, seed, policy, policy_params, generator, model,
         problem_id) in rows:
        state = hot[track_id][0]
        out.append(RunningTrack(
            track_id, job_id, team_id, parallelism, budget_iterations, state.next_decision,
            state.next_decision - state.t, per_job[job_id], budget_tokens, tokens_used,
            budget_usd, cost_usd, budget_wall_s, started_at, target, original_id, best_id, size,
            version, track_started_at, seed, policy, policy_params, generator, model,
            problem_id))
    return out, hot


def hot_states(session: Session, rows: Sequence[tuple[int, int, Any, int]]) -> dict[int, Hot]:
    """The policy state of each track of `rows`, each (track id, job id, track start time, row
    version), as this transaction sees it, with the track's row where it was read.

    Every select and update of a track's policy counts in its state (`next_decision`, `t`), and
    the track row's `iterations_dispatched` / `iterations_done` are written with the state
    (`state.write_back`), so a leader that keeps states hot does not rewrite each track row
    with every pass: where nothing vacuums, those rewrites were what made this read grow. A
    state this process holds for the row's version is the truth; a track it holds none for
    (the first pass of a leadership term) has its state loaded, the events after the stored
    one replayed, and kept."""
    hot: dict[int, Hot] = {track_id: (state, None)
                           for track_id, state in held_states(session, rows).items()}
    for track_id, (track, state) in saved_states(session).items():  # this transaction's own
        hot[track_id] = (state, track if object_session(track) is session else None)
    cold = [row[0] for row in rows if row[0] not in hot]
    if cold:
        tracks = session.scalars(select(Track).where(Track.id.in_(cold))
                                 .options(WITHOUT_STORED_STATE)).all()
        for track in tracks:
            state = load_state(track, shared=True)
            remember_state(session, track, state)  # held from this commit on
            hot[track.id] = (state, track)
    return hot


def with_free_slots(rows: Sequence[RunningTrack]) -> list[RunningTrack]:
    """The rows of `running_tracks` with a free slot; the rest still count their pulls for
    their job (`job_pulls`) and team (`pulls_by_team`)."""
    return [row for row in rows
            if row.pulls < row.parallelism and row.iterations_dispatched < row.budget_iterations]


def pulls_by_team(rows: Sequence[RunningTrack]) -> dict[int, int]:
    """Pulls in flight per team over running tracks (rows of `running_tracks`), from the
    track counters: the in-flight count a pass needs without reading attempts, whose old row
    versions pile up where nothing vacuums (`in_flight_by_team` read thousands per pass)."""
    counts: dict[int, int] = {}
    for row in rows:
        counts[row.team_id] = counts.get(row.team_id, 0) + int(row.pulls)
    return counts


# Running tracks and running jobs are read apart and joined in one statement: each side is
# materialized first (a CTE), so the planner cannot probe one per row of the other. Where nothing
# analyzes the tables, it guessed one running job and probed the tracks' status index once per
# job, each probe reading every stale entry of that index (measured: 100 probes of 363 entries).
# Pulls in flight come from the counters (`hot_states`): every pull ends in
# `ingest.finish_pull` (a policy update), except pulls abandoned or cancelled with their track,
# which leaves `running` in the same transaction; counting open attempts instead read every
# attempt version the state index still points to (thousands per pass without vacuum).
_TRACKS = (select(Track.id.label("track_id"), Track.job_id, Track.version,
                  Track.started_at.label("track_started_at"), Track.target,
                  Track.original_candidate_id, Track.best_candidate_id, Track.frontier_size)
           .where(Track.status == "running")
           .cte("running_track").prefix_with("MATERIALIZED", dialect="postgresql"))
_JOBS = (select(Job.id, Job.team_id, Job.parallelism, Job.budget_iterations, Job.budget_tokens,
                Job.tokens_used, Job.budget_usd, Job.cost_usd, Job.budget_wall_s, Job.started_at,
                Job.seed, Job.policy, Job.policy_params, Job.generator, Job.model,
                Job.problem_id)
         .where(Job.status == "running", Job.cancel_requested.is_(False))
         .cte("running_job").prefix_with("MATERIALIZED", dialect="postgresql"))
_RUNNING = (select(*_TRACKS.c, *(c for c in _JOBS.c if c.key != "id"))
            .join_from(_TRACKS, _JOBS, _JOBS.c.id == _TRACKS.c.job_id)
            .order_by(_TRACKS.c.track_id))


def job_rank(rows: Sequence[RunningTrack]) -> dict[int, int]:
    """Each job's turn inside its team (rows of `tracks_with_free_slots`): fewest pulls in
    flight over all its running tracks first, then the oldest job."""
    per_job = {row.job_id: int(row.job_pulls) for row in rows}
    ordered = sorted(per_job, key=lambda job_id: (per_job[job_id], job_id))
    return {job_id: position for position, job_id in enumerate(ordered)}


def select_for_track(session: Session, job: Job, track: Track, count: int,
                     state: PolicyState | None = None) -> int:
    """`count` decisions from the policy, each recorded as a pending generate attempt;
    `state`: the track's current state, read only (None: loaded)."""
    policy = policy_for(job)
    # read only; each select returns a new one
    state = before = state if state is not None else load_state(track, shared=True)
    for _ in range(count):
        seed = job.seed * 100_003 + state.next_decision  # pulls selected before: per pull
        decision, state = policy.select(state)
        ref = {"strategy": decision.strategy, "cluster": decision.cluster, "seed": seed}
        step = new_pull(session, job, track, decision, ref)  # a translate step on a placeholder
        append_event(session, job.id, "pull_selected",
                     {"target": track.target, **decision.to_dict(), **step})
    # The last pull of the budget: the stored counters let the track finish (`lifecycle`).
    save_state(session, track, state, before,
               write_now=state.next_decision >= job.budget_iterations)
    return count


def in_flight_by_team(session: Session) -> dict[int, int]:
    """Open attempts (pending, dispatched or awaiting re-send) per team."""
    query = (select(Job.team_id, func.count(Attempt.id)).join(Job, Job.id == Attempt.job_id)
             .where(Attempt.state.in_(ACTIVE_ATTEMPT_STATES)).group_by(Job.team_id))
    return {int(team): int(count) for team, count in session.execute(query).all()}


__all__ = ["RunningTrack", "TimeBudget", "hot_states", "in_flight_by_team", "job_rank",
           "job_value", "pulls_by_team", "read_running", "running_tracks", "select_for_track",
           "select_pulls", "track_value", "tracks_with_free_slots", "with_free_slots"]
