"""A few prepared read queries on the event loop, through psycopg2's asynchronous mode.

The conditional-poll fast path (services/api/fastpoll.py) reads a token row and a job version
per request. Running that through a worker thread, an ORM session and a pooled connection's
pre-ping costs more CPU than the answer; here a query is one `EXECUTE` of a statement prepared
once per connection, awaited on the loop (`add_reader`), with no thread hop.

Connections are autocommit (psycopg2's asynchronous connections always are), so every query
sees everything committed before it started. When every connection is busy a caller waits
its turn (queries take well under a millisecond, far less than the ordinary path costs), up to
`WAIT_S`; then `acquire` gives None and the caller takes its ordinary path, which stays
correct. Any error closes the connection; the caller treats it like a busy pool.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import psycopg2
import psycopg2.extensions

QUERY_TIMEOUT_S = 2.0
WAIT_S = 0.5  # longest wait for a busy pool's next free connection


async def _ready(conn: Any) -> None:
    """Drive an asynchronous connection until its current operation finished."""
    loop = asyncio.get_running_loop()
    while True:
        state = conn.poll()
        if state == psycopg2.extensions.POLL_OK:
            return
        fd = conn.fileno()
        waiter = loop.create_future()
        if state == psycopg2.extensions.POLL_READ:
            loop.add_reader(fd, _wake, waiter)
            try:
                await waiter
            finally:
                loop.remove_reader(fd)
        elif state == psycopg2.extensions.POLL_WRITE:
            loop.add_writer(fd, _wake, waiter)
            try:
                await waiter
            finally:
                loop.remove_writer(fd)
        else:
            raise psycopg2.OperationalError(f"unexpected poll state {state}")


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class AsyncPgPool:
    """Up to `size` asynchronous connections, each with `statements` prepared on connect.

    `statements` maps a name to `(parameter types, SQL with $1.. placeholders)`; `fetch` runs
    one by name. Connections open on demand on the running loop and are plain sockets, so the
    pool works from whichever loop calls it, one query per connection at a time.
    """

    def __init__(self, connect_args: Sequence[Any], connect_kwargs: Mapping[str, Any],
                 statements: Mapping[str, tuple[str, str]], size: int = 8) -> None:
        self._args = tuple(connect_args)
        self._kwargs = dict(connect_kwargs)
        self._prepare = [f"PREPARE {name}({types}) AS {sql}"
                         for name, (types, sql) in statements.items()]
        self._execute = {name: f"EXECUTE {name}({', '.join(['%s'] * len(types.split(',')))})"
                         for name, (types, _) in statements.items()}
        self._idle: list[Any] = []
        self._waiters: deque[asyncio.Future[Any]] = deque()
        self._open = 0
        self.size = size

    async def _connect(self) -> Any:
        conn = psycopg2.connect(*self._args, **self._kwargs, async_=1)
        try:
            await _ready(conn)
            cursor = conn.cursor()
            for statement in self._prepare:
                cursor.execute(statement)
                await _ready(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any | None]:
        """A connection, or None when none came free within `WAIT_S`."""
        if self._idle:
            conn = self._idle.pop()
        elif self._open < self.size:
            self._open += 1
            try:
                conn = await self._connect()
            except BaseException:
                self._open -= 1
                raise
        else:
            conn = await self._wait_for_one()
            if conn is None:
                yield None
                return
        try:
            yield conn
        except BaseException:
            self._open -= 1
            conn.close()  # mid-query or broken: never reuse
            raise
        self._release(conn)

    async def _wait_for_one(self) -> Any | None:
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(WAIT_S):
                return await waiter
        except TimeoutError:  # a connection handed over as time ran out is still ours
            return waiter.result() if waiter.done() and not waiter.cancelled() else None
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _release(self, conn: Any) -> None:
        """Hand a free connection to the longest waiter on this loop, else keep it idle."""
        loop = asyncio.get_running_loop()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done() and waiter.get_loop() is loop:
                waiter.set_result(conn)
                return
        self._idle.append(conn)

    async def fetch(self, conn: Any, name: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """The rows of prepared statement `name` run with `params` on `conn`."""
        cursor = conn.cursor()
        async with asyncio.timeout(QUERY_TIMEOUT_S):
            cursor.execute(self._execute[name], tuple(params))
            await _ready(conn)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows

    def close(self) -> None:
        """Close idle connections (busy ones close when their query returns)."""
        while self._idle:
            self._idle.pop().close()
            self._open -= 1


__all__ = ["AsyncPgPool", "QUERY_TIMEOUT_S"]
