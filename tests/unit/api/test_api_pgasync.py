"""The fast path's Postgres pool: prepared queries on the event loop, bounded connections,
waiting for a free one, and never reusing a connection that failed."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import Engine

from services.api import pgasync
from services.api.pgasync import AsyncPgPool

STATEMENTS = {
    "slow_echo": ("integer", "SELECT $1::integer FROM pg_sleep(0.05)"),
    "inverse": ("integer", "SELECT 1 / $1::integer"),
}


def pool(engine: Engine, size: int) -> AsyncPgPool:
    args, kwargs = engine.dialect.create_connect_args(engine.url)
    return AsyncPgPool(args, kwargs, STATEMENTS, size=size)


async def echo(p: AsyncPgPool, value: int) -> int | None:
    async with p.acquire() as conn:
        if conn is None:
            return None
        rows = await p.fetch(conn, "slow_echo", (value,))
        return int(rows[0][0])


def test_concurrent_queries_share_a_bounded_pool(postgres_engine: Engine) -> None:
    p = pool(postgres_engine, size=2)

    async def run() -> list[int | None]:
        return await asyncio.gather(*(echo(p, n) for n in range(6)))

    assert asyncio.run(run()) == list(range(6))  # four waited for a free connection
    assert p._open == 2 and len(p._idle) == 2
    p.close()
    assert p._open == 0


def test_a_failed_query_closes_its_connection_and_the_pool_recovers(
    postgres_engine: Engine,
) -> None:
    p = pool(postgres_engine, size=1)

    async def run() -> int:
        with pytest.raises(Exception, match="division by zero"):
            async with p.acquire() as conn:
                await p.fetch(conn, "inverse", (0,))
        assert p._open == 0 and not p._idle
        async with p.acquire() as conn:
            return int((await p.fetch(conn, "inverse", (1,)))[0][0])

    assert asyncio.run(run()) == 1
    p.close()


def test_a_caller_gives_up_when_no_connection_comes_free(
    postgres_engine: Engine, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pgasync, "WAIT_S", 0.01)
    p = pool(postgres_engine, size=1)

    async def run() -> tuple[int | None, int | None]:
        first, second = await asyncio.gather(echo(p, 1), echo(p, 2))
        return first, second

    assert asyncio.run(run()) == (1, None)  # the second found the only connection busy
    assert p._open == 1
    p.close()
