"""The API load benchmark's load generator: a small HTTP/1.1 client on asyncio.

It shares this machine's cores with the server and Postgres, so it is built to cost little:
keep-alive connections opened up front, each request a prebuilt byte string, answers parsed
just far enough for the status and `Content-Length`, one coroutine keeping the schedule. The
schedule is open loop (request i is due at t0 + i/rate whether or not earlier ones returned);
a request finding every connection busy waits in a queue, and its latency still runs from its
due time, so a slow server shows up as latency rather than as a lower offered rate.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import httpx

CONNECTIONS = 32  # keep-alive connections; more requests in flight wait in the client
GRACE_S = 10.0  # after the schedule ends, wait this long for answers, then give up

MIXES = ("full", "dashboard")
# The dashboard mix, per 10 requests: 5 events polls (the job page, every second), 3 job
# details, 2 fleet views; every CHANGED_EVERY-th request finds a change (sent without a
# current ETag, so it gets the full answer), the others find none and send their ETag.
DASHBOARD_PATHS = ("events", "job", "events", "fleet", "events", "job", "events", "fleet",
                   "events", "job")
CHANGED_EVERY = 10


@dataclass(frozen=True)
class Target:
    """What the load generator polls, and how (`mix`: full answers or a dashboard's polls)."""

    host: str
    port: int
    job_id: str  # the public id
    token: str
    last_seq: int
    mix: str = "full"
    etags: tuple[tuple[str, str], ...] = ()  # (path, ETag) learnt before the run

    @property
    def base(self) -> str:
        """The server's URL."""
        return f"http://{self.host}:{self.port}"

    def path(self, i: int) -> str:
        """Full mix: alternate job detail and events after a recent sequence number.
        Dashboard mix: DASHBOARD_PATHS, events polled after the last number (caught up)."""
        if self.mix == "dashboard":
            kind = DASHBOARD_PATHS[i % len(DASHBOARD_PATHS)]
            return self.paths()[("events", "job", "fleet").index(kind)]
        if i % 2 == 0:
            return f"/v1/jobs/{self.job_id}"
        return f"/v1/jobs/{self.job_id}/events?after={max(0, self.last_seq - 1 - i % 10)}"

    def paths(self) -> tuple[str, str, str]:
        """The dashboard mix's three URLs: events, job detail, fleet."""
        return (f"/v1/jobs/{self.job_id}/events?after={self.last_seq}",
                f"/v1/jobs/{self.job_id}", "/v1/fleet")

    def headers(self, i: int) -> dict[str, str]:
        """If-None-Match with the learnt ETag, except for requests that find a change."""
        if self.mix != "dashboard" or i % CHANGED_EVERY == CHANGED_EVERY - 1:
            return {}
        tag = dict(self.etags).get(self.path(i))
        return {"If-None-Match": tag} if tag else {}

    def request(self, i: int) -> bytes:
        """Request i of the mix as bytes on the wire."""
        lines = [f"GET {self.path(i)} HTTP/1.1", f"Host: {self.host}:{self.port}",
                 f"Authorization: Bearer {self.token}"]
        lines += [f"{k}: {v}" for k, v in self.headers(i).items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def period(self) -> int:
        """How many requests before the mix repeats."""
        return len(DASHBOARD_PATHS) * CHANGED_EVERY if self.mix == "dashboard" else 10


def learn_etags(target: Target) -> Target:
    """The dashboard mix's ETags, as a dashboard has them after its first load."""
    auth = {"Authorization": f"Bearer {target.token}"}
    found = []
    for path in target.paths():
        tag = httpx.get(target.base + path, headers=auth, timeout=10).headers.get("ETag")
        if tag:
            found.append((path, tag))
    return Target(target.host, target.port, target.job_id, target.token, target.last_seq,
                  "dashboard", tuple(found))


class _Connection(asyncio.Protocol):
    """One keep-alive connection carrying one request at a time."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.due = 0.0  # of the request in flight; 0: none

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def send(self, request: bytes, due: float) -> None:
        self.due = due
        assert self.transport is not None
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while self.due:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).lower()
            status = int(head[9:12])
            length = 0
            at = head.find(b"\r\ncontent-length:")
            if at >= 0:
                stop = head.find(b"\r\n", at + 2)
                length = int(head[at + 17:stop if stop >= 0 else len(head)])
            elif b"\r\ntransfer-encoding:" in head:
                status = 0  # chunked answers are not expected from this API: count an error
            if status == 304:
                length = 0
            if len(self.buffer) < end + 4 + length:
                return
            del self.buffer[:end + 4 + length]
            due, self.due = self.due, 0.0
            self.run.answered(self, due, status)

    def connection_lost(self, exc: Exception | None) -> None:
        self.run.lost(self)


@dataclass
class _Run:
    """The state of one rate: free connections, waiting requests, answers."""

    requests: list[bytes]
    connections: list[_Connection] = field(default_factory=list)
    free: list[_Connection] = field(default_factory=list)
    waiting: deque[tuple[bytes, float]] = field(default_factory=deque)
    latencies: list[float] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    expected: int = 0

    def submit(self, request: bytes, due: float) -> None:
        if self.free:
            self.free.pop().send(request, due)
        else:
            self.waiting.append((request, due))

    def answered(self, conn: _Connection, due: float, status: int) -> None:
        self.latencies.append(time.perf_counter() - due)
        self.statuses.append(status)
        if len(self.statuses) >= self.expected:
            self.finished.set()
        if self.waiting:
            conn.send(*self.waiting.popleft())
        else:
            self.free.append(conn)

    def lost(self, conn: _Connection) -> None:
        if conn in self.free:
            self.free.remove(conn)
        if conn.due:  # its request gets no answer: an error
            conn.due = 0.0
            self.answered_error()

    def answered_error(self) -> None:
        self.statuses.append(0)
        self.latencies.append(float("nan"))
        if len(self.statuses) >= self.expected:
            self.finished.set()


async def run_rate(target: Target, rate: float, seconds: float,
                   connections: int = CONNECTIONS) -> dict[str, Any]:
    """Offer `rate` requests/s for `seconds` on an open-loop schedule; latency and throughput."""
    loop = asyncio.get_running_loop()
    count = int(rate * seconds)
    run = _Run([target.request(i) for i in range(target.period())], expected=count)
    for _ in range(connections):
        _, conn = await loop.create_connection(lambda: _Connection(run), target.host, target.port)
        run.connections.append(conn)
        run.free.append(conn)
    t0 = time.perf_counter() + 0.02
    for i in range(count):
        due = t0 + i / rate
        delay = due - time.perf_counter()
        if delay > 0.0002:
            await asyncio.sleep(delay)
        run.submit(run.requests[i % len(run.requests)], due)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(run.finished.wait(),
                               max(0.0, t0 + seconds + GRACE_S - time.perf_counter()))
    span = min(time.perf_counter() - t0, seconds + GRACE_S)
    answered = len(run.statuses)
    for conn in run.connections:
        if conn.transport is not None:
            conn.transport.close()
    good = [lat for lat, status in zip(run.latencies, run.statuses, strict=True)
            if status in (200, 304)]
    return {"mix": target.mix, "offered_rps": rate, "requests": count,
            "errors": count - len(good), "unanswered": count - answered,
            "not_modified": sum(status == 304 for status in run.statuses),
            "throughput_rps": len(good) / span, "good_latencies_s": good}

