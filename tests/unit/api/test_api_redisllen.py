"""Queue lengths over a raw Redis connection agree with redis-py, survive errors, and stop
at an unreachable server (the fleet fast path then leaves the poll to the endpoint)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
import redis

from services.api.fleet import broker_depths
from services.api.redisllen import QueueLengths, RedisReplyError, command


@pytest.fixture
def queues(redis_url: str) -> Iterator[tuple[str, str, str]]:
    """Three fresh keys in the test's own Redis database: a list of 3, a missing key and a
    plain string."""
    client = redis.Redis.from_url(redis_url)
    names = tuple(f"kb-test-{uuid.uuid4().hex[:8]}-{kind}" for kind in ("list", "none", "str"))
    client.rpush(names[0], "a", "b", "c")
    client.set(names[2], "not a list")
    yield names  # type: ignore[misc]
    client.delete(*names)
    client.close()


def test_lengths_match_redis_py(queues: tuple[str, str, str], redis_url: str) -> None:
    listed, missing, _ = queues
    lengths = QueueLengths(redis_url)

    async def twice() -> list[dict[str, int]]:
        return [await lengths((listed, missing)) for _ in range(2)]  # one connection, reused

    first, second = asyncio.run(twice())
    assert first == second == {listed: 3, missing: 0}
    assert first == broker_depths(redis_url, (listed, missing))


def test_an_error_reply_raises_and_the_next_call_reconnects(queues: tuple[str, str, str],
                                                           redis_url: str) -> None:
    listed, _, string = queues
    lengths = QueueLengths(redis_url)

    async def run() -> dict[str, int]:
        with pytest.raises(RedisReplyError, match="WRONGTYPE"):
            await lengths((listed, string))
        return await lengths((listed,))

    assert asyncio.run(run()) == {listed: 3}


def test_an_unreachable_server_raises() -> None:
    lengths = QueueLengths("redis://127.0.0.1:1/0")
    with pytest.raises(OSError):
        asyncio.run(lengths(("gpu.h100",)))


def test_commands_are_resp_arrays_and_tls_urls_are_refused() -> None:
    assert command("LLEN", "gpu.h100") == b"*2\r\n$4\r\nLLEN\r\n$8\r\ngpu.h100\r\n"
    with pytest.raises(ValueError, match="rediss://"):
        QueueLengths("rediss://example:6380/0")
