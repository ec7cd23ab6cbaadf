"""The scheduler process: wait for the leader lock, then run engine steps until told to stop.

Each pass: expire leases, drain results, select and dispatch, finish tracks and jobs (all in
kernelband.scheduling.pipeline.step, each sub-step a fenced transaction), then record heartbeats. Results
are acknowledged to Redis only after the step that ingested them returned, so a crash
redelivers them and the at-most-once-per-attempt rule absorbs the duplicate.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.session import (
    DatabaseError,
    DatabaseUnavailableError,
    check_schema_version,
    make_engine,
    make_session_factory,
    session_scope,
)
from kernelband.scheduling.collector import PassCollector
from kernelband.scheduling.dispatch import Dispatcher
from kernelband.scheduling.fencing import FencingError, verify_epoch
from kernelband.scheduling.leases import recheck_untaken, resend_tries
from kernelband.scheduling.pipeline import (
    LEADER_ENGINE_OPTIONS,
    EngineContext,
    fenced,
    step,
    write_back_states,
)
from kernelband.scheduling.state_cache import clear_cache
from services.scheduler.dispatcher import CeleryDispatcher
from services.scheduler.leader import LeaderLock, require_postgres
from services.scheduler.workers import record_heartbeats, scheduler_heartbeat
from services.worker.heartbeat import package_versions

log = logging.getLogger(__name__)

STANDBY_POLL_S = 1.0  # how often a replica retries the lock
LOCK_CHECK_S = 2.0  # how often the leader confirms it still holds the lock
# A worker reports a task as soon as it takes it; a new leader gives untaken tries that no
# queue holds this long to be reported before sending them again (scheduling.leases.recheck_untaken).
TAKEOVER_GRACE_S = 10.0
OWN_HEARTBEAT_S = 5.0
ERROR_BACKOFF_S = 2.0
BROKER_ERRORS = (KombuOperationalError, RedisError, ConnectionError)


@dataclass
class LeaderStats:
    """Counters of one leadership term, logged when it ends."""

    steps: int = 0
    ingested: int = 0
    dispatched: int = 0
    requeued: int = 0
    more_waiting: bool = False  # the last step stopped at a bound (kernelband.scheduling.pipeline)
    errors: list[str] = field(default_factory=list)


def run_scheduler(settings: Settings, name: str, stop: threading.Event) -> None:
    """Run until `stop` is set: standby while another replica leads, lead otherwise."""
    url = settings.effective_database_url
    require_postgres(url)
    engine = make_engine(url, **LEADER_ENGINE_OPTIONS)
    check_schema_version(engine)  # fails fast on an unmigrated schema
    factory = make_session_factory(engine)
    lock = LeaderLock(url, name, factory)
    dispatcher = CeleryDispatcher(settings)
    try:
        while not stop.is_set():
            epoch = take_lock(lock, name)
            if epoch is None:
                stop.wait(STANDBY_POLL_S)
                continue
            clear_cache()  # another leader may have run since: states are rebuilt from Postgres
            recovered = dispatcher.recover_unacked()
            log.info("%s leads with epoch %s; %s unacknowledged results put back", name, epoch,
                     recovered)
            ctx = leader_context(factory, dispatcher, settings, epoch)
            recheck_after_takeover(ctx, name)
            stats = lead(ctx, lock, dispatcher, name, stop)
            hand_over(ctx, name)
            log.info("%s stopped leading: %s", name, stats)
            lock.release()
    finally:
        dispatcher.close()  # unacknowledged results return to the queue
        lock.dispose()
        engine.dispose()


def leader_context(factory: sessionmaker[Session], dispatcher: Dispatcher, settings: Settings,
                   epoch: int) -> EngineContext:
    """The leader's engine context: fenced by its epoch, housekeeping at most every
    `housekeeping_interval_s`, each pass's selection bounded by `select_budget_ms`."""
    return EngineContext(factory=factory, dispatcher=dispatcher, settings=settings,
                         leader_epoch=epoch, housekeeping_s=settings.housekeeping_interval_s,
                         select_budget_s=settings.select_budget_ms / 1000,
                         state_writeback_s=settings.state_writeback_s)


def hand_over(ctx: EngineContext, name: str) -> None:
    """Write back the policy states this leader holds newer than their rows (best effort: the
    next leader rebuilds them from the event log should this fail, or a lost lock fence it)."""
    try:
        written = write_back_states(ctx)
    except (FencingError, DatabaseError, SQLAlchemyError) as exc:
        log.warning("%s: policy states not written back at hand-over (%s); the next leader "
                    "replays them from the event log", name, exc)
        return
    log.info("%s: %s policy states written back at hand-over", name, written)


def take_lock(lock: LeaderLock, name: str) -> int | None:
    """The new epoch when this replica took the lock; None when it is held or Postgres failed.

    Postgres dropping the connection while the lock is being taken (a restart, terminated
    backends) is a reason to try again at the next poll, not to exit.
    """
    try:
        return lock.try_acquire()
    except (DatabaseError, SQLAlchemyError) as exc:
        log.warning("%s could not take the leader lock (%s); trying again", name, exc)
        lock.release()  # a fresh connection next time; a lock taken on the dead one is gone
        return None


def recheck_after_takeover(ctx: EngineContext, name: str) -> None:
    """Tries the previous leader may never have sent get a short grace instead of a lease.

    Best effort: should it fail, those tries still come back when their leases run out.
    """
    try:
        with fenced(ctx) as session:
            shortened = recheck_untaken(session, ctx.clock(), TAKEOVER_GRACE_S,
                                        ctx.dispatcher.waiting)
    except (FencingError, DatabaseError, SQLAlchemyError) as exc:
        log.warning("%s: untaken tries not rechecked (%s); their leases will bring them back",
                    name, exc)
        return
    if shortened:
        log.info("%s: %s dispatched tries are in no queue and no worker reported them; sent "
                 "again unless a worker reports within %.0f s", name, shortened,
                 TAKEOVER_GRACE_S)


def lead(ctx: EngineContext, lock: LeaderLock, dispatcher: CeleryDispatcher, name: str,
         stop: threading.Event) -> LeaderStats:
    """Engine steps while this process holds the lock and nobody asked it to stop.

    Garbage collection runs between steps only (`PassCollector`); the first step of a
    term loads every track's state, and the collection after it freezes that state.
    """
    stats, last_check, last_beat = LeaderStats(), time.monotonic(), 0.0
    collector = PassCollector()
    collector.start()
    try:
        while not stop.is_set():
            if time.monotonic() - last_check > LOCK_CHECK_S:
                if not lock.still_held():
                    stats.errors.append("lost the leader lock")
                    return stats
                last_check = time.monotonic()
            try:
                guarded_step(ctx, dispatcher, stats, stop)
                resend_from_gone_workers(ctx, dispatcher, name)
            except FencingError as exc:
                stats.requeued += dispatcher.requeue_drained()
                stats.errors.append(str(exc))
                return stats
            if time.monotonic() - last_beat > OWN_HEARTBEAT_S or dispatcher.has_heartbeats():
                write_heartbeats(ctx, dispatcher, name)
                last_beat = time.monotonic()
            collector.between_passes()
        return stats
    finally:
        collector.stop()


def guarded_step(ctx: EngineContext, dispatcher: CeleryDispatcher, stats: LeaderStats,
                 stop: threading.Event) -> None:
    """One engine step; results are acked after it, requeued when it fails (not fencing)."""
    try:
        # A pass that stopped at its bounds left work: the next one starts without waiting.
        wait_s = 0.0 if stats.more_waiting else ctx.settings.poll_interval_s
        report = step(ctx, drain_timeout_s=wait_s)
    except BROKER_ERRORS as exc:
        stats.errors.append(f"broker: {exc}"[:300])
        log.warning("broker error, reconnecting in %ss: %s", ERROR_BACKOFF_S, exc)
        stop.wait(ERROR_BACKOFF_S)
        reconnect(dispatcher, stats)
        return
    except (DatabaseUnavailableError, OperationalError) as exc:
        stats.requeued += dispatcher.requeue_drained(count_failure=False)
        stats.errors.append(f"database: {exc}"[:300])
        log.warning("database unreachable, retrying in %ss: %s", ERROR_BACKOFF_S, exc)
        stop.wait(ERROR_BACKOFF_S)
        return
    except (DatabaseError, SQLAlchemyError) as exc:
        # A failed ingestion: results go back (counted, so a poison one is dropped later).
        stats.requeued += dispatcher.requeue_drained()
        stats.errors.append(f"{type(exc).__name__}: {exc}"[:300])
        log.exception("scheduler step failed; results requeued")
        stop.wait(ERROR_BACKOFF_S)
        return
    try:
        dispatcher.ack_drained()
    except BROKER_ERRORS as exc:
        # The step's effects are committed; unacked results come back on reconnect and are
        # absorbed by the at-most-once rule, so losing the broker here is not fatal.
        stats.errors.append(f"broker (ack): {exc}"[:300])
        log.warning("broker error while acknowledging, reconnecting in %ss: %s",
                    ERROR_BACKOFF_S, exc)
        stop.wait(ERROR_BACKOFF_S)
        reconnect(dispatcher, stats)
    stats.steps += 1
    stats.more_waiting = report.more_waiting
    stats.ingested += report.ingested
    stats.dispatched += report.dispatched


def resend_from_gone_workers(ctx: EngineContext, dispatcher: CeleryDispatcher, name: str) -> int:
    """Tries held by workers that stopped beating are sent again now (not at lease expiry),
    with the deliveries of their queues nobody reported, and their dead deliveries leave the
    broker; returns how many tries were sent again."""
    gone = dispatcher.take_gone_workers()
    if not gone:
        return 0
    tries = {attempt: task for seen in gone.values() for attempt, task in seen.holds.items()}
    try:
        queues = {queue for seen in gone.values() for queue in seen.queues}
        # a live worker beats the moment it starts a task: one interval without is enough
        tries |= dispatcher.unreported_deliveries(queues, min(s.interval_s for s in gone.values()))
        with fenced(ctx) as session:
            given_up = resend_tries(session, tries, ctx.settings.max_tries, "worker gone")
        ctx.claimed_upto = 0  # their tries are claimed again, whatever their ids
        forgotten = dispatcher.forget_deliveries(given_up)
    except (DatabaseError, SQLAlchemyError, *BROKER_ERRORS) as exc:
        log.warning("%s: tries of gone workers %s not sent again (%s); their leases will",
                    name, sorted(gone), exc)
        return 0
    log.warning("%s: workers %s stopped beating; %s of %s tries they held sent again, %s dead "
                "deliveries dropped", name, sorted(gone), len(given_up), len(tries), forgotten)
    return len(given_up)


def reconnect(dispatcher: CeleryDispatcher, stats: LeaderStats) -> None:
    """Reopen the results connection; unacknowledged results are put back for this leader."""
    try:
        dispatcher.reconnect()
        stats.requeued += dispatcher.recover_unacked()
    except BROKER_ERRORS as exc:
        log.warning("broker still unreachable: %s", exc)


def write_heartbeats(ctx: EngineContext, dispatcher: CeleryDispatcher, name: str) -> None:
    """Record worker heartbeats and the scheduler's own, in one fenced transaction."""
    beats = [*dispatcher.take_heartbeats(),
             scheduler_heartbeat(name, ctx.leader_epoch, package_versions(), OWN_HEARTBEAT_S)]
    try:
        with session_scope(ctx.factory) as session:
            verify_epoch(session, ctx.leader_epoch)
            record_heartbeats(session, beats, dispatcher.take_current())
    except (DatabaseError, SQLAlchemyError, FencingError) as exc:
        log.warning("heartbeats not recorded: %s", exc)
