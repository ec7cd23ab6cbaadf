"""Dead workers noticed in seconds: silence over missed beats, the tries a worker held, the
fleet row's status and runner isolation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db import session_scope
from kernelband.db.models import Worker
from services.api.fleet import fleet_worker
from services.scheduler.liveness import Liveness, WorkerSeen
from services.scheduler.workers import record_heartbeats, scheduler_heartbeat
from services.worker.heartbeat import build_heartbeat
from services.worker.messages import Heartbeat, parse_message


def test_a_worker_silent_for_its_missed_beats_is_gone_with_the_tries_it_held() -> None:
    live = Liveness(default_interval_s=5.0, missed_beats=3)
    live.heard("cpu@a", interval_s=1.0, now=0.0)  # its heartbeat says 1 s
    live.took("cpu@a", 7, "attempt-7-x", now=0.5)
    live.took("cpu@a", 8, "attempt-8-y", now=0.6)
    live.answered("cpu@a", 8, now=1.0)  # answered: no longer held
    live.took("gpu@b", 9, "attempt-9-z", now=1.0)  # interval unknown: the scheduler's 5 s
    assert live.held_by_live() == {7, 9}
    assert live.take_gone(now=3.9) == {}
    assert held(live.take_gone(now=4.1)) == {"cpu@a": {7: "attempt-7-x"}}
    assert live.take_gone(now=10.0) == {}  # reported once
    assert held(live.take_gone(now=16.1)) == {"gpu@b": {9: "attempt-9-z"}}
    live.heard("cpu@a", interval_s=1.0, now=20.0)  # back: alive again, holding nothing
    assert live.take_gone(now=20.5) == {} and live.workers["cpu@a"].holds == {}


def test_a_result_frees_its_attempt_whichever_worker_reported_it() -> None:
    live = Liveness(default_interval_s=1.0, missed_beats=2)
    live.took("old@a", 5, "attempt-5-1", now=0.0)
    live.answered("new@b", 5, now=0.1)  # the re-sent try answered elsewhere
    assert held(live.take_gone(now=5.0)) == {"old@a": {}, "new@b": {}}


def held(gone: dict[str, WorkerSeen]) -> dict[str, dict[int, str]]:
    return {name: seen.holds for name, seen in gone.items()}


def test_heartbeats_carry_interval_and_runner_isolation(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KERNELBAND_HEARTBEAT_INTERVAL_S", "2")
    from kernelband.config import get_settings

    get_settings.cache_clear()
    try:
        beat = build_heartbeat("cpu@node", ["cpu"])
    finally:
        get_settings.cache_clear()
    assert beat.interval_s == 2.0 and beat.isolation  # e.g. jail:bwrap, weak:setuid
    parsed = parse_message(beat.to_dict())
    assert isinstance(parsed, Heartbeat) and parsed.isolation == beat.isolation
    old = {k: v for k, v in beat.to_dict().items() if k not in ("interval_s", "isolation")}
    assert parse_message(old).interval_s == 0.0  # type: ignore[union-attr]  # older workers


def test_the_fleet_row_keeps_isolation_and_turns_gone_after_missed_beats(
        sqlite_factory: sessionmaker[Session]) -> None:
    sent = datetime(2026, 11, 28, 12, 0, 0, tzinfo=UTC)
    beats = [Heartbeat(worker="gpu0@node", queue="gpu.h100", target="h100", gpu_name="H100",
                       versions={}, interval_s=2.0, isolation="jail:bwrap",
                       sent_at=sent.timestamp()),
             scheduler_heartbeat("sched-a", 3, {}, interval_s=5.0)]
    beats[1] = Heartbeat(**{**beats[1].to_dict(), "sent_at": sent.timestamp()})
    with session_scope(sqlite_factory) as session:
        record_heartbeats(session, beats)
    settings = Settings(worker_missed_beats=3)
    with session_scope(sqlite_factory) as session:
        rows = {w.name: w for w in session.scalars(select(Worker))}
        gpu = fleet_worker(rows["gpu0@node"], settings, now=sent + timedelta(seconds=5))
        gpu_later = fleet_worker(rows["gpu0@node"], settings, now=sent + timedelta(seconds=7))
        sched = fleet_worker(rows["sched-a"], settings, now=sent + timedelta(seconds=7))
    assert gpu.isolation == "jail:bwrap" and gpu.status == "alive" and gpu.gone_after_s == 6.0
    assert gpu_later.status == "gone" and gpu_later.gone_at == sent + timedelta(seconds=6)
    assert sched.status == "alive" and sched.isolation is None and sched.gone_after_s == 15.0
