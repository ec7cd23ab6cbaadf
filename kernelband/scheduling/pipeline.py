"""The scheduler, one step at a time: select -> dispatch -> ingest -> update.

Read `step` top to bottom to follow one pull. Every sub-step (selecting and claiming share one)
is its own transaction that first checks the leader epoch (fencing); work is handed to the
dispatcher only after the transaction that created it has committed. All state (policy state
with its RNG, counters, attempts) lives in the database (the leader writes a track's policy
state back at intervals, and a new one replays the events after it: `scheduling.replay`), so a
scheduler killed at any instant continues where it stopped. In the distributed deployment this
same `step` runs in the leader's loop (services/scheduler) with the
Celery dispatcher; embedded mode runs it in-process with a thread pool.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import Track, utcnow
from kernelband.db.session import DatabaseError, session_scope
from kernelband.scheduling.attempts import (
    ACTIVE_ATTEMPT_STATES,
    ClaimedAttempt,
    claim_pending,
    claimable_noted,
    insert_claimed,
    send_on_commit,
)
from kernelband.scheduling.candidate_facts import hold_candidates
from kernelband.scheduling.dispatch import Dispatcher, TaskMessage, TaskResult
from kernelband.scheduling.events import hold_event_counters
from kernelband.scheduling.fencing import FencingError, verify_epoch
from kernelband.scheduling.ingest import fail_lost_attempt, lock_attempt
from kernelband.scheduling.ingest_batch import BATCH_SIZE, apply_batch, apply_locked
from kernelband.scheduling.leases import expire_leases, extend_lease, lease_deadline
from kernelband.scheduling.lifecycle import finish_tracks_and_jobs, start_queued_jobs
from kernelband.scheduling.payloads import PayloadFacts, task_payloads
from kernelband.scheduling.quotas import teams_out_of_quota
from kernelband.scheduling.results import LeaseBeat, read_result
from kernelband.scheduling.row_updates import batch_row_updates
from kernelband.scheduling.selection import TimeBudget, select_pulls
from kernelband.scheduling.state import (
    WITHOUT_STORED_STATE,
    keep_states_hot,
    load_state,
    write_back,
)
from kernelband.scheduling.state_cache import dirty_tracks

log = logging.getLogger(__name__)

# The leader's engine pings no connection before handing it out: a pass checks one out per
# transaction (five or more a pass), and each ping was a round trip. A connection that died
# fails its pass instead; the disconnect invalidates the pool, and the leader's loop requeues
# the pass's results and runs the next pass on fresh connections.
LEADER_ENGINE_OPTIONS: dict[str, Any] = {"pool_pre_ping": False}

# Attempt ids below the highest claimed one that a claim still looks at: room for an attempt
# whose transaction committed after a later one's (none in one scheduler thread).
CLAIM_WINDOW = 1024


@dataclass
class EngineContext:
    """What a scheduler step needs: database, dispatcher, settings, fence and clock."""

    factory: sessionmaker[Session]
    dispatcher: Dispatcher
    settings: Settings
    leader_epoch: int | None = None  # None: embedded mode, nothing to fence
    clock: Callable[[], datetime] = utcnow
    # Housekeeping (jobs start, leases expire, tracks finish) at most this often (seconds);
    # 0: every pass unless passes run back to back. The leader process sets
    # Settings.housekeeping_interval_s.
    housekeeping_s: float = 0.0
    # When the last housekeeping ran (time.monotonic), and whether the last pass stopped at a
    # bound; in memory only: a restarted scheduler does its housekeeping in its first pass.
    housekeeping_at: float | None = None
    back_to_back: bool = False
    # A pass stops selecting new pulls once it has spent this many seconds choosing them
    # (checked after each track; the rest wait for the next pass, which runs back to back);
    # 0: no time bound. The leader process sets Settings.select_budget_ms; embedded mode has
    # none, so a seeded run's passes select the same pulls however fast the machine is.
    select_budget_s: float = 0.0
    out_of_time: bool = False  # the last selection stopped at `select_budget_s`
    # A track's policy state is written back at most this often (seconds) and otherwise kept
    # in this process (`state.keep_states_hot`); 0: with every change (embedded mode, tests).
    # The leader process sets Settings.state_writeback_s.
    state_writeback_s: float = 0.0
    # The highest attempt id a claim took: every pending attempt at or below it was claimed
    # (claims go oldest first, one transaction at a time), so the next claim looks above
    # `claimed_upto - CLAIM_WINDOW` only. Back to 0 whenever tries expire (an expired try
    # is claimed again, whatever its id). In memory; a new scheduler starts from 0.
    claimed_upto: int = 0
    # The `now` of the last committed lease expiry: the next looks at leases ending since
    # (`expire_leases`). In memory; a new scheduler looks at every lease first.
    leases_seen_to: datetime | None = None
    # The highest id of an attempt this scheduler inserted already claimed (`send_on_commit`)
    # in a committed transaction: a claim that leaves nothing pending may move `claimed_upto`
    # up to it, so the next search does not walk those ids again.
    created_upto: int = 0
    # `attempts.claimable_noted` when a claim last left nothing to claim (-1: claim next pass).
    # Until it moves, housekeeping runs (which may add some, as may other processes) or
    # `claimed_upto` is reset, a pass skips its claim: with new attempts inserted claimed it
    # would find none.
    pending_seen: int = -1
    # (`claimed_upto`, `created_upto`, `pending_seen`) once the last claim's transaction commits
    after_commit: tuple[int, int, int] | None = None
    # Teams whose jobs get no new pulls (a daily quota used up), refreshed with housekeeping.
    over_quota: frozenset[int] = frozenset()
    # The jobs', problems' and tracks' columns a task payload carries that never change once
    # set; read once per job rather than once per pass.
    payload_facts: PayloadFacts = field(default_factory=PayloadFacts)

    def housekeeping_due(self) -> bool:
        """Whether this pass starts jobs, expires leases and finishes tracks: at most every
        `housekeeping_s`, and while passes run back to back (the last one stopped at a bound)
        at most every `Settings.housekeeping_interval_s` (about 6 ms of reads a pass)."""
        now = time.monotonic()
        back_to_back_s = self.settings.housekeeping_interval_s if self.back_to_back else 0.0
        interval = max(self.housekeeping_s, back_to_back_s)
        if self.housekeeping_at is not None and now - self.housekeeping_at < interval:
            return False
        self.housekeeping_at = now
        self.pending_seen = -1  # what housekeeping (or another process) added is claimed
        return True

    def stopped_at_bound(self, selected: int, dispatched: int) -> bool:
        """Whether a pass that selected and sent this many stopped at a bound, its pull or send
        count or its selection time (remembered for `housekeeping_due`); the next pass then
        need not wait for results."""
        self.back_to_back = (self.out_of_time or selected >= self.settings.max_pulls_per_pass
                             or dispatched >= self.settings.max_dispatch_per_pass)
        return self.back_to_back

    def selection_budget(self) -> TimeBudget | None:
        """The time a pass's selection may spend choosing pulls; None: no time bound."""
        return TimeBudget(self.select_budget_s) if self.select_budget_s > 0 else None


@dataclass
class StepReport:
    """What one step did (for logs, metrics and the progress bar)."""

    started_jobs: int = 0
    expired: int = 0
    ingested: int = 0
    ignored: int = 0
    selected: int = 0
    dispatched: int = 0
    finished: list[int] = field(default_factory=list)  # job ids finished in this step
    more_waiting: bool = False  # the pass stopped at a bound: the next one need not wait


@contextmanager
def fenced(ctx: EngineContext) -> Iterator[Session]:
    """A transaction that refuses to commit unless this scheduler is still the leader.
    Its changed rows are written one statement per table and flush (`row_updates`).

    What the transaction kept in `session.info` (the attempt values it locked, rows held for
    its commit, prefetched candidates) is dropped once it has ended: the session's listeners
    and the session refer to each other, so it otherwise waited for a garbage collection,
    about 3,500 objects a pass at 100 jobs x 1,000 candidates."""
    session: Session | None = None
    try:
        with session_scope(ctx.factory) as session:
            verify_epoch(session, ctx.leader_epoch)
            batch_row_updates(session)
            keep_states_hot(session, ctx.state_writeback_s)
            hold_candidates(session, ctx.payload_facts.candidates)
            yield session
    finally:
        if session is not None:
            session.info.clear()


def step(ctx: EngineContext, drain_timeout_s: float = 0.0) -> StepReport:
    """One scheduler pass over every running job."""
    report = StepReport()
    housekeeping = ctx.housekeeping_due()
    if housekeeping:
        with fenced(ctx) as session:
            report.started_jobs = start_queued_jobs(session, ctx.settings.max_job_starts_per_team,
                                                    ctx.settings.max_in_flight_per_team,
                                                    ctx.settings.max_running_jobs_per_team or None)
        now = ctx.clock()
        # a clock set back: leases written since may end before the last look, so all are read
        since = ctx.leases_seen_to if ctx.leases_seen_to and ctx.leases_seen_to <= now else None
        with fenced(ctx) as session:
            report.expired = expire_leases(session, now, ctx.settings.max_tries,
                                           ctx.settings.lease_s, ctx.dispatcher.waiting,
                                           ctx.settings.queue_timeout_s, since)
        ctx.leases_seen_to = now  # committed
        if report.expired:
            ctx.claimed_upto = 0  # their tries are claimed again, whatever their ids
    # Results in: each is read into its kind's typed value and applied once (ingest.apply_result);
    # a pull that ends there is the bandit's reward: `policy.update` in ingest.finish_pull.
    report.ingested, report.ignored = ingest_batch(ctx, ctx.dispatcher.drain(drain_timeout_s))
    if housekeeping:
        with fenced(ctx) as session:
            report.finished = finish_tracks_and_jobs(session, ctx.clock())
            ctx.over_quota = teams_out_of_quota(session, ctx.over_quota)
        if ctx.state_writeback_s > 0:  # tracks gone quiet: their replay stays short
            write_back_states(ctx, ctx.state_writeback_s)
    # Pulls out: each track with free slots asks its policy, `policy.select` in
    # selection.select_for_track, which commits a generate attempt per decision; sent after.
    report.selected, report.dispatched = select_and_dispatch(ctx)
    report.more_waiting = ctx.stopped_at_bound(report.selected, report.dispatched)
    return report


def write_back_states(ctx: EngineContext, older_than_s: float = 0.0) -> int:
    """Write back the policy states this process holds newer than their rows (written
    `older_than_s` or longer ago; 0: all, as a leader handing over does); returns how many."""
    with ctx.factory() as probe:  # memory only: no transaction while nothing is held
        if not dirty_tracks(probe, older_than_s):
            return 0
    with fenced(ctx) as session:
        tracks = session.scalars(_DIRTY_TRACKS, {"ids": dirty_tracks(session, older_than_s)}).all()
        # each state carries its job's last event number: held for all of them at once
        hold_event_counters(session, {track.job_id for track in tracks})
        write_back(session, [(track, load_state(track, shared=True)) for track in tracks])
    return len(tracks)


# Built once: these tracks, their stored policy state left unread.
_DIRTY_TRACKS = (select(Track).where(Track.id.in_(bindparam("ids", expanding=True)))
                 .options(WITHOUT_STORED_STATE))


def ingest_result(session: Session, attempt_id: int, result: dict, max_tries: int) -> bool:
    """Apply a worker result at most once per attempt id; False when it was a duplicate.
    The dict is read into its kind's typed value here (`results.read_result`)."""
    loaded = lock_attempt(session, attempt_id)  # held until applied (see lock_attempt)
    if not loaded:
        return False  # unknown attempt id
    return apply_locked(session, loaded[0], read_result(loaded[0].kind, result), max_tries)


def ingest_batch(ctx: EngineContext, items: Sequence[TaskResult]) -> tuple[int, int]:
    """Apply results (and lease heartbeats) many per transaction; returns (applied, ignored).
    A batch failing on a result (not the fence or database) is retried one per transaction."""
    outcomes: list[bool] = []
    for start in range(0, len(items), BATCH_SIZE):
        chunk = items[start:start + BATCH_SIZE]
        try:
            with fenced(ctx) as session:
                send_on_commit(session)  # the attempts results lead to go out with the commit
                now = ctx.clock()
                outcomes += apply_batch(session, chunk, now, ctx.settings.lease_s,
                                        ctx.settings.max_tries)
                created = insert_claimed(session, now, lease_deadline(now, ctx.settings.lease_s))
                payloads = task_payloads(session, created, ctx.payload_facts)
            send_claimed(ctx, created, payloads, created=True)
        except (FencingError, DatabaseError):
            raise
        except Exception:
            log.exception("a batch of %s results failed; applying them one by one", len(chunk))
            outcomes += [ingest_safely(ctx, item.attempt_id, item.result) for item in chunk]
    return sum(outcomes), len(outcomes) - sum(outcomes)


def ingest_safely(ctx: EngineContext, attempt_id: int, result: dict) -> bool:
    """Ingest one result; a result that cannot be applied fails its attempt instead of the loop."""
    beat = LeaseBeat.read(result)
    if beat is not None:  # a worker started (or is still on) it: queue time is no loss
        with fenced(ctx) as session:
            now = ctx.clock()
            extend_lease(session, attempt_id, lease_deadline(now, ctx.settings.lease_s),
                         beat.task_id, now)
        return False  # a lease extension only: the attempt stays open for its real result
    try:
        with fenced(ctx) as session:
            return ingest_result(session, attempt_id, result, ctx.settings.max_tries)
    except (FencingError, DatabaseError):
        raise
    except Exception as exc:  # a malformed result must not stop every other job
        log.exception("result of attempt %s could not be applied", attempt_id)
        reason = f"ingest_error:{type(exc).__name__}"
    with fenced(ctx) as session:
        loaded = lock_attempt(session, attempt_id)
        attempt = loaded[0] if loaded else None
        if attempt is None or attempt.state not in ACTIVE_ATTEMPT_STATES:
            return False
        fail_lost_attempt(session, attempt, reason)
    return True


def select_and_dispatch(ctx: EngineContext) -> tuple[int, int]:
    """New pulls are recorded as pending attempts, then pending attempts are claimed, oldest
    first, in one fenced transaction, and sent once it has committed; both bounded per pass
    (`max_pulls_per_pass` and the leader's `select_budget_s`, `max_dispatch_per_pass`). One
    transaction, not two: a commit each pass less, and nothing is sent before the attempts it
    names are committed."""
    budget = ctx.selection_budget()
    now = ctx.clock()
    with fenced(ctx) as session:
        send_on_commit(session)  # each pull's generate attempt goes out with the commit
        selected = select_pulls(session, now, ctx.settings.max_in_flight_per_team,
                                ctx.settings.max_pulls_per_pass, budget, ctx.over_quota)
        claimed, payloads = claim_with_payloads(ctx, session, now,
                                                ctx.settings.max_dispatch_per_pass)
    ctx.out_of_time = budget is not None and budget.spent
    return selected, send_claimed(ctx, claimed, payloads)


def dispatch_pending(ctx: EngineContext, limit: int = 256) -> int:
    """Claim pending attempts in one committed transaction, then hand them to the dispatcher."""
    now = ctx.clock()
    with fenced(ctx) as session:
        claimed, payloads = claim_with_payloads(ctx, session, now, limit, always=True)
    return send_claimed(ctx, claimed, payloads)


def claim_with_payloads(ctx: EngineContext, session: Session, now: datetime, limit: int,
                        always: bool = False) -> tuple[list[ClaimedAttempt], list[dict[str, Any]]]:
    """The attempts this transaction created, inserted claimed (`send_on_commit`), and
    pending ones claimed, oldest first, up to `limit` in all, with their task payloads.
    The claim is skipped while nothing can be pending (`EngineContext.pending_seen`) unless
    `always`."""
    lease = lease_deadline(now, ctx.settings.lease_s)
    created = insert_claimed(session, now, lease)
    room, seen = limit - len(created), claimable_noted()
    run = room > 0 and (always or ctx.pending_seen != seen or ctx.claimed_upto == 0)
    claimed = claim_pending(session, now, lease, room, max(ctx.claimed_upto - CLAIM_WINDOW, 0)
                            ) if run else []
    created_upto = max([ctx.created_upto, *(attempt.id for attempt in created)])
    upto = max([ctx.claimed_upto, *(attempt.id for attempt in claimed)])
    if run and len(claimed) < room:  # nothing left pending above where the search began
        upto = max(upto, created_upto)
    elif run:  # it filled its room: more may be pending
        seen = -1
    else:
        seen = ctx.pending_seen
    ctx.after_commit = (upto, created_upto, seen)
    claimed += created
    return claimed, task_payloads(session, claimed, ctx.payload_facts)


def send_claimed(ctx: EngineContext, claimed: list[ClaimedAttempt],
                 payloads: list[dict[str, Any]], created: bool = False) -> int:
    """Hand attempts whose claim has committed to the dispatcher; returns how many.
    `created`: all of them were inserted claimed by `insert_claimed`, none by a claim."""
    if created:
        ctx.created_upto = max([ctx.created_upto, *(attempt.id for attempt in claimed)])
    elif ctx.after_commit is not None:
        ctx.claimed_upto, ctx.created_upto, ctx.pending_seen = ctx.after_commit
    ctx.after_commit = None
    messages = [TaskMessage(attempt.id, attempt.kind, attempt.queue, payload, attempt.task_id)
                for attempt, payload in zip(claimed, payloads, strict=True)]
    # After commit: a crash here, or a broker that is down, is recovered by lease expiry.
    ctx.dispatcher.submit_many(messages)
    return len(messages)


__all__ = ["LEADER_ENGINE_OPTIONS", "EngineContext", "StepReport", "dispatch_pending", "fenced", "ingest_batch",
           "ingest_result", "ingest_safely", "select_and_dispatch", "step", "write_back_states"]
