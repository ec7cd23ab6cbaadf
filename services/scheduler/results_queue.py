"""Many results-queue messages per Redis round trip, in kombu's own unacknowledged bookkeeping.

kombu's `Queue.get` takes one message per call: a new Redis client, an RPOP per priority level
and a pipeline that records the delivery as unacknowledged; `Message.ack` is another pipeline.
A fleet of 1,000 GPUs sends about a thousand results a second, so the scheduler takes them in
one Lua script call (`take`) and acknowledges them in one pipeline (`ack_all`).

The script pops and records atomically, in the same keys and format as kombu's Redis QoS
(`unacked` hash: tag -> `[message, exchange, routing_key]`, `unacked_index` zset: tag -> time),
so `restore_visible` (a new leader's `recover_unacked`), `Message.requeue` and the channel's
restore at close treat these deliveries exactly like kombu's own. Unlike kombu's two calls,
no instant exists where a message is popped but not yet recorded.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import orjson
import redis
from kombu.message import Message
from kombu.transport.virtual.base import QoS as VirtualQoS

# KEYS: unacked hash, unacked index, then the queue's list per priority level (highest first);
# ARGV: how many messages at most, the delivery time.
TAKE_SCRIPT = """
local taken = {}
local limit = tonumber(ARGV[1])
for i = 3, #KEYS do
  if #taken >= limit then break end
  local items = redis.call('RPOP', KEYS[i], limit - #taken)
  if items then
    for _, raw in ipairs(items) do
      local info = cjson.decode(raw)['properties']
      local where = info['delivery_info']
      redis.call('ZADD', KEYS[2], ARGV[2], info['delivery_tag'])
      redis.call('HSET', KEYS[1], info['delivery_tag'], '[' .. raw .. ',' ..
                 cjson.encode(where['exchange']) .. ',' .. cjson.encode(where['routing_key']) .. ']')
      taken[#taken + 1] = raw
    end
  end
end
return taken
"""


class ResultsQueueReader:
    """Takes and acknowledges messages of one queue on one kombu Redis channel, in bulk."""

    def __init__(self, channel: object, queue: str) -> None:
        self._channel = channel
        self._client = redis.Redis(connection_pool=channel.pool)  # type: ignore[attr-defined]
        self._take = self._client.register_script(TAKE_SCRIPT)
        qos = channel.qos  # type: ignore[attr-defined]
        self._qos = qos
        self._unacked, self._index = qos.unacked_key, qos.unacked_index_key
        levels = dict.fromkeys(channel._q_for_pri(queue, p)  # type: ignore[attr-defined]
                               for p in channel.priority_steps)  # type: ignore[attr-defined]
        self._lists = list(levels)  # the order kombu's own get reads them in

    def take(self, limit: int) -> list[Message]:
        """Up to `limit` messages, each recorded as delivered and unacknowledged."""
        if limit <= 0:
            return []
        raws = self._take(keys=[self._unacked, self._index, *self._lists],
                          args=[limit, time.time()])
        messages = []
        for raw in raws:
            message = self._channel.Message(_envelope(raw), channel=self._channel)  # type: ignore[attr-defined]
            VirtualQoS.append(self._qos, message, message.delivery_tag)  # in-process record only
            messages.append(message)
        return messages

    def ack_all(self, messages: Sequence[Message]) -> None:
        """Acknowledge every message in one round trip (their effects are committed)."""
        tags = [message.delivery_tag for message in messages]
        if not tags:
            return
        with self._client.pipeline(transaction=False) as pipe:
            pipe.zrem(self._index, *tags)
            pipe.hdel(self._unacked, *tags)
            pipe.execute()
        for tag in tags:
            VirtualQoS.ack(self._qos, tag)  # forget it in-process (no restore at close)


def _envelope(raw: bytes) -> Any:
    """kombu's JSON envelope of a message (orjson; the standard decoder for what it refuses)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


__all__ = ["TAKE_SCRIPT", "ResultsQueueReader"]
