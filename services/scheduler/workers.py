"""The workers table: the scheduler records each heartbeat it receives (workers cannot)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.db.models import Worker
from services.worker.messages import Heartbeat

SCHEDULER_QUEUE = "scheduler"


def note_current(current: dict[str, int | None], worker: str, attempt_id: int,
                 lease_beat: bool) -> bool:
    """Follow what a worker is on: a lease beat names its attempt, that attempt's result ends
    it (a worker with several processes shows the attempt it took last). True on a change."""
    before = current.get(worker)
    if not worker:
        return False
    if lease_beat:
        current[worker] = attempt_id
    elif before == attempt_id:
        current[worker] = None
    return current.get(worker) != before


def record_heartbeats(session: Session, beats: list[Heartbeat],
                      current: dict[str, int | None] | None = None) -> int:
    """Upsert one row per worker name with its latest heartbeat; returns rows written.

    `current` (worker name -> attempt id, None when its last attempt ended) sets
    `current_attempt_id` of the workers it names that have a row.
    """
    latest: dict[str, Heartbeat] = {}
    for beat in beats:
        if beat.worker not in latest or beat.sent_at >= latest[beat.worker].sent_at:
            latest[beat.worker] = beat
    names = sorted({*latest, *(current or {})})
    rows = {row.name: row for row in session.scalars(select(Worker).where(Worker.name.in_(names)))}
    for beat in latest.values():  # one read for every worker that beat: a fleet beats often
        row = rows.get(beat.worker)
        if row is None:
            row = rows[beat.worker] = Worker(name=beat.worker, queue=beat.queue)
            session.add(row)
        row.queue, row.target, row.gpu_name = beat.queue, beat.target, beat.gpu_name
        # the fleet view reads these beside the versions: how its runners confine submitted
        # code, and the interval its silence is measured in
        row.versions = {**beat.versions,
                        "holds_database_credentials": beat.holds_database_credentials,
                        **({"isolation": beat.isolation} if beat.isolation else {}),
                        **({"heartbeat_interval_s": beat.interval_s} if beat.interval_s else {})}
        row.last_heartbeat = datetime.fromtimestamp(beat.sent_at, UTC)
    for name, attempt_id in (current or {}).items():
        if name in rows:
            rows[name].current_attempt_id = attempt_id
    return len(latest)


def scheduler_heartbeat(name: str, epoch: int | None, versions: dict[str, str],
                        interval_s: float = 0.0) -> Heartbeat:
    """The scheduler's own liveness row (queue "scheduler"), written while it leads."""
    return Heartbeat(worker=name, queue=SCHEDULER_QUEUE, target=None, gpu_name=None,
                     versions={**versions, "leader_epoch": str(epoch)}, interval_s=interval_s)
