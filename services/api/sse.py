"""Server-sent events: a job's events (and a suite's progress) pushed as they are committed.

One `JobWatcher` per API process reads the `version` of every watched job in one query per
interval (`jobs.version` moves with each event the scheduler appends), and wakes only the
streams whose job changed; a stream then reads its new events itself. So an open stream costs
the process a coroutine and a share of that one query, not a query of its own each interval.
A stream resumes after `Last-Event-ID` (a job event's `seq`), sends a comment as heartbeat
when idle, and ends after the event that finishes the job; reconnecting to a finished job
whose events were all sent gets 204, which tells an EventSource to stop reconnecting.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio.to_thread
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import session_scope
from kernelband.db.models import FINISHED_JOB_STATUSES, Event, Job
from kernelband.public_ids import public_payload
from services.api.timefmt import utc_z

EVENT_STREAM = "text/event-stream"
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}  # no proxy buffering
RETRY_MS = 2000  # how long an EventSource waits before reconnecting
PAGE = 500  # events read per round trip while catching up


def wants_stream(accept: str | None) -> bool:
    """Whether the client asked for server-sent events."""
    return EVENT_STREAM in (accept or "")


def last_event_id(header: str | None, after: int) -> int:
    """Where a stream resumes: the `Last-Event-ID` a reconnecting client sends, else `after`."""
    text = (header or "").strip()
    return int(text) if text.isdigit() and len(text) <= 10 else after


def frame(event_id: int, kind: str, data: dict[str, Any]) -> str:
    """One SSE message (data is one JSON line)."""
    return f"id: {event_id}\nevent: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def heartbeat() -> str:
    """A comment line: keeps proxies and load balancers from closing an idle stream."""
    return ": heartbeat\n\n"


class JobWatcher:
    """Wakes streams when their jobs' versions change; one polling task per process."""

    def __init__(self, factory: Callable[[], sessionmaker[Session] | None],
                 interval_s: float) -> None:
        self._factory = factory
        self._interval_s = interval_s
        # job id -> {a waiting stream's wake-up: the job version that stream has seen}
        self._waiters: dict[int, dict[asyncio.Event, int]] = {}
        self._task: asyncio.Task[None] | None = None

    @property
    def streams(self) -> int:
        """Streams waiting now (one per open stream, between its reads)."""
        return len({e for waiting in self._waiters.values() for e in waiting})

    async def wait(self, seen: dict[int, int], timeout_s: float) -> bool:
        """Until one of the jobs in `seen` (job id -> the version the caller read with its
        events) moves past that version (True), or `timeout_s` passes (False)."""
        changed = asyncio.Event()
        for job_id, version in seen.items():
            self._waiters.setdefault(job_id, {})[changed] = version
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        try:
            await asyncio.wait_for(changed.wait(), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            for job_id in seen:
                waiting = self._waiters.get(job_id)
                if waiting is not None:
                    waiting.pop(changed, None)
                    if not waiting:
                        del self._waiters[job_id]

    async def _run(self) -> None:
        while self._waiters:
            try:
                versions = await anyio.to_thread.run_sync(self._read_versions, list(self._waiters))
            except Exception:  # a database hiccup: streams keep their heartbeats, retry later
                versions = {}
            for job_id, version in versions.items():
                for changed, seen in list(self._waiters.get(job_id, {}).items()):
                    if version != seen:
                        changed.set()
            await asyncio.sleep(self._interval_s)

    def _read_versions(self, ids: list[int]) -> dict[int, int]:
        factory = self._factory()
        if factory is None:
            return {}
        with session_scope(factory) as session:
            rows = session.execute(select(Job.id, Job.version).where(Job.id.in_(ids))).all()
            return {int(i): int(v) for i, v in rows}


JobEvents = tuple[list[tuple[int, str, dict[str, Any]]], bool, bool, int]


def read_job_events(factory: sessionmaker[Session], job_id: int, after: int) -> JobEvents:
    """(events after `after` as (seq, kind, data), more waiting, job finished, job version),
    the version read first: the events can only be newer than it."""
    with session_scope(factory) as session:
        status, version = session.execute(select(Job.status, Job.version)
                                          .where(Job.id == job_id)).one()
        rows = session.scalars(select(Event).where(Event.job_id == job_id, Event.seq > after)
                               .order_by(Event.seq).limit(PAGE + 1)).all()
        events = [(e.seq, e.kind, {"seq": e.seq, "kind": e.kind,
                                   "payload": public_payload(e.payload),
                                   "created_at": utc_z(e.created_at) if e.created_at else None})
                  for e in rows[:PAGE]]
        return events, len(rows) > PAGE, status in FINISHED_JOB_STATUSES, int(version)


async def job_stream(factory: sessionmaker[Session], watcher: JobWatcher, job_id: int,
                     after: int, heartbeat_s: float,
                     still_allowed: Callable[[], bool] = lambda: True) -> AsyncIterator[str]:
    """Every event of the job after `after`, in order, then each new one as it is committed.

    `still_allowed` is asked at each heartbeat: a token revoked or expired while its stream
    is open ends the stream (a reconnect then gets the 401)."""
    yield f"retry: {RETRY_MS}\n\n"
    cursor = after
    while True:
        events, more, finished, version = await anyio.to_thread.run_sync(
            read_job_events, factory, job_id, cursor)
        for seq, kind, data in events:
            yield frame(seq, kind, data)
            cursor = seq
        if more:
            continue
        if finished:
            return  # the finishing event was sent (a reconnect gets 204)
        if not await watcher.wait({job_id: version}, heartbeat_s):
            if not await anyio.to_thread.run_sync(still_allowed):
                return
            yield heartbeat()


def read_suite_progress(factory: sessionmaker[Session], job_ids: list[int]) -> dict[str, Any]:
    """A suite's progress: job counts per status, and a number that grows with every change."""
    with session_scope(factory) as session:
        rows = session.execute(select(Job.id, Job.status, Job.version)
                               .where(Job.id.in_(job_ids))).all()
    by_status: dict[str, int] = {}
    for _, status, _ in rows:
        by_status[status] = by_status.get(status, 0) + 1
    finished = sum(n for s, n in by_status.items() if s in FINISHED_JOB_STATUSES)
    return {"jobs": len(rows), "jobs_finished": finished, "finished": finished == len(rows),
            "by_status": by_status, "progress_id": sum(int(v) for _, _, v in rows),
            "versions": {int(i): int(v) for i, _, v in rows}}


async def suite_stream(factory: sessionmaker[Session], watcher: JobWatcher, suite_id: str,
                       job_ids: list[int], after: int, heartbeat_s: float) -> AsyncIterator[str]:
    """A `progress` event whenever one of the suite's jobs changes (its id: the sum of the
    jobs' versions, which only grows), ending with the one that says the suite finished."""
    yield f"retry: {RETRY_MS}\n\n"
    while True:
        progress = await anyio.to_thread.run_sync(read_suite_progress, factory, job_ids)
        versions = progress.pop("versions")
        if progress["progress_id"] > after:
            after = progress["progress_id"]
            yield frame(after, "progress", {"suite_id": suite_id, **progress})
        if progress["finished"]:
            return
        if not await watcher.wait(versions, heartbeat_s):
            yield heartbeat()
