"""Celery task messages as the Redis list entries kombu writes for them, built directly.

`app.send_task` cost the scheduler about a quarter of a millisecond of CPU per task (option
and route resolution, configuration lookups, kombu's publish path with two JSON encodings):
three tasks a pull, more than its own work per pull with a thousand GPUs to feed. A task's
message here is still Celery's (`amqp.as_task_v2` builds its headers and body); what is done
directly is kombu's part: the JSON envelope with the base64 body, the delivery properties,
and the LPUSH onto the queue's list, all of a pass's tasks in one pipelined round trip.
tests/unit/services/test_task_entries.py compares the entries with what `send_task` writes
for every task kind. A queue's first task still goes through `send_task`, which declares the
queue and refuses one the app does not know (`task_create_missing_queues=False`).
"""

from __future__ import annotations

import base64
from typing import Any
from uuid import uuid4

from celery import Celery
from kombu.utils.json import dumps

KWARGS_REPR = "{}"


class TaskEntries:
    """Builds the Redis list entry of a task sent to a queue by the direct exchange."""

    def __init__(self, app: Celery) -> None:
        self._amqp = app.amqp
        self._reply_to = app.thread_oid  # what send_task puts in reply_to

    def entry(self, name: str, task_id: str, args: list[Any], queue: str,
              argsrepr: str) -> str:
        """The JSON kombu's Redis transport pushes for `send_task(name, args, queue=queue,
        task_id=task_id, ignore_result=True, argsrepr=argsrepr, kwargsrepr="{}")`."""
        message = self._amqp.as_task_v2(task_id, name, args=args, kwargs={},
                                        reply_to=self._reply_to, ignore_result=True,
                                        argsrepr=argsrepr, kwargsrepr=KWARGS_REPR)
        properties = {**message.properties, "argsrepr": argsrepr, "kwargsrepr": KWARGS_REPR,
                      "delivery_mode": 2,
                      "delivery_info": {"exchange": "", "routing_key": queue},
                      "priority": 0, "body_encoding": "base64", "delivery_tag": str(uuid4())}
        body = base64.b64encode(dumps(message.body).encode()).decode()
        return str(dumps({"body": body, "content-encoding": "utf-8",
                          "content-type": "application/json", "headers": message.headers,
                          "properties": properties}))


__all__ = ["TaskEntries"]
