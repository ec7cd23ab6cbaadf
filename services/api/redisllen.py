"""Queue lengths from Redis on the event loop: every LLEN in one write and one round trip.

The fleet view's 304 fast path needs the broker's queue depths on every poll (they are part
of its ETag). redis-py's asyncio pipeline costs several times the CPU of the rest of that
poll, so this sends the `LLEN` commands as prebuilt RESP bytes and reads one integer reply
each. One connection per process (reopened when the running loop changes, as in tests),
used by one caller at a time; any error or timeout closes it and raises, and the caller
answers from its ordinary path instead. `rediss://` (TLS) is not handled here: it raises.
"""

from __future__ import annotations

import asyncio
import contextlib

from redis.connection import parse_url

TIMEOUT_S = 0.5


def command(*words: str | bytes) -> bytes:
    """One RESP command (an array of bulk strings)."""
    parts = [w.encode() if isinstance(w, str) else w for w in words]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


class RedisReplyError(ConnectionError):
    """Redis answered with an error, or with something other than what was asked."""


class QueueLengths:
    """`await lengths(queues)` -> {queue: LLEN} from the Redis at `url`."""

    def __init__(self, url: str) -> None:
        if not url.startswith("redis://"):
            raise ValueError(f"only redis:// URLs: {url.split('://')[0]}://")
        options = parse_url(url)
        self.host, self.port = str(options.get("host", "localhost")), int(options.get("port", 6379))
        self._hello: list[bytes] = []
        if options.get("password"):
            user = [str(options["username"])] if options.get("username") else []
            self._hello.append(command("AUTH", *user, str(options["password"])))
        if options.get("db"):
            self._hello.append(command("SELECT", str(options["db"])))
        self._requests: dict[tuple[str, ...], bytes] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def __call__(self, queues: tuple[str, ...]) -> dict[str, int]:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a connection of another (finished) loop is unusable
            self._stream, self._loop, self._lock = None, loop, asyncio.Lock()
        request = self._requests.get(queues)
        if request is None:
            request = self._requests[queues] = b"".join(command("LLEN", q) for q in queues)
        async with self._lock:
            try:
                async with asyncio.timeout(TIMEOUT_S):
                    reader, writer = self._stream or await self._connect()
                    writer.write(request)
                    return {q: await _integer(reader) for q in queues}
            except BaseException:
                self.close()
                raise

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        self._stream = (reader, writer)
        for hello in self._hello:
            writer.write(hello)
            reply = await reader.readuntil(b"\r\n")
            if not reply.startswith(b"+"):
                raise RedisReplyError(reply.decode(errors="replace").strip())
        return reader, writer

    def close(self) -> None:
        """Drop the connection (the next call opens a new one)."""
        if self._stream is not None:
            with contextlib.suppress(Exception):
                self._stream[1].close()
            self._stream = None


async def _integer(reader: asyncio.StreamReader) -> int:
    reply = await reader.readuntil(b"\r\n")
    if not reply.startswith(b":"):
        raise RedisReplyError(reply.decode(errors="replace").strip())
    return int(reply[1:-2])


__all__ = ["QueueLengths", "RedisReplyError", "command"]
