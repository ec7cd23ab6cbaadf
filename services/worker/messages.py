"""Messages a worker sends back on the `results` queue: task results and heartbeats.

The results queue is a plain kombu queue that only the scheduler consumes; it acknowledges a
message only after the effect is committed in Postgres (see services/scheduler/dispatcher.py).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from kombu import Exchange, Queue
from kombu.connection import Connection

from services.worker.queues import RESULTS_QUEUE

RESULTS_EXCHANGE = Exchange(RESULTS_QUEUE, type="direct", durable=True)
RESULTS = Queue(RESULTS_QUEUE, RESULTS_EXCHANGE, routing_key=RESULTS_QUEUE, durable=True)


class MessageFormatError(ValueError):
    """A message on the results queue is not a result or heartbeat of this version."""


@dataclass(frozen=True)
class ResultMessage:
    """The outcome of one attempt, as produced by a kernelband.scheduling.tasks body."""

    attempt_id: int
    kind: str
    result: dict[str, Any]
    worker: str = ""
    wall_s: float = 0.0
    sent_at: float = field(default_factory=time.time)
    type: str = "result"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ResultMessage:
        return cls(
            attempt_id=int(data["attempt_id"]),
            kind=str(data["kind"]),
            result=dict(data["result"]),
            worker=str(data.get("worker", "")),
            wall_s=float(data.get("wall_s", 0.0)),
            sent_at=float(data.get("sent_at", 0.0)),
        )


@dataclass(frozen=True)
class Heartbeat:
    """A worker saying it is alive, what it consumes and what it runs on."""

    worker: str
    queue: str
    target: str | None
    gpu_name: str | None
    versions: dict[str, str]
    holds_database_credentials: bool = False
    # seconds between this worker's heartbeats (0: not said; the scheduler assumes its own
    # setting) and how its runners confine submitted code (`sandbox.jail.isolation_level`)
    interval_s: float = 0.0
    isolation: str = ""
    sent_at: float = field(default_factory=time.time)
    type: str = "heartbeat"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Heartbeat:
        return cls(
            worker=str(data["worker"]),
            queue=str(data["queue"]),
            target=data.get("target"),
            gpu_name=data.get("gpu_name"),
            versions={str(k): str(v) for k, v in dict(data.get("versions", {})).items()},
            holds_database_credentials=bool(data.get("holds_database_credentials", False)),
            interval_s=float(data.get("interval_s") or 0.0),
            isolation=str(data.get("isolation") or ""),
            sent_at=float(data.get("sent_at", 0.0)),
        )


def parse_message(body: Any) -> ResultMessage | Heartbeat:
    """Decode one results-queue body; raises MessageFormatError on anything else."""
    if not isinstance(body, dict):
        raise MessageFormatError(f"results message must be a JSON object, got {type(body).__name__}")
    try:
        if body.get("type") == "heartbeat":
            return Heartbeat.from_dict(body)
        if body.get("type") == "result":
            return ResultMessage.from_dict(body)
    except (KeyError, TypeError, ValueError) as exc:
        raise MessageFormatError(f"malformed {body.get('type')} message: {exc}") from exc
    raise MessageFormatError(f"unknown results message type {body.get('type')!r}")


def publish(connection: Connection, message: ResultMessage | Heartbeat) -> None:
    """Send one message to the results queue, retrying while the broker is briefly away."""
    with connection.Producer() as producer:
        producer.publish(
            message.to_dict(),
            exchange=RESULTS_EXCHANGE,
            routing_key=RESULTS_QUEUE,
            declare=[RESULTS],
            serializer="json",
            delivery_mode=2,
            retry=True,
            retry_policy={"max_retries": 5, "interval_start": 0.5, "interval_step": 1.0},
        )
