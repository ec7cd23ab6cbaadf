"""SIMULATED GPU fleet: one process answering the service's task queues in Redis.

It plays `--gpus` GPU workers of one target (`-c 1` each, so at most that many profile or
verify tasks in service at once) plus instant LLM and CPU workers. Tasks are taken from the
Celery queues the scheduler fills (Redis lists), and answered on the `results` queue in the
workers' message format (services/worker/messages.py). A GPU task "runs" for a lognormal time
(median `--median-s`, sigma `--sigma`); no kernel, compiler or LLM runs. At exit it writes
every GPU task's (start, end) monotonic times as JSON to `--out`.
"""

from __future__ import annotations

import argparse
import base64
import heapq
import json
import signal
import time
import uuid
from pathlib import Path
from typing import Any, cast

import numpy as np
import orjson
import redis

from bench.sim_tasks import SIM_TASKS
from services.worker.messages import RESULTS_EXCHANGE, ResultMessage
from services.worker.queues import RESULTS_QUEUE

INSTANT_QUEUES = ("llm", "cpu")


def task_of(raw: bytes) -> dict[str, Any]:
    """The TaskMessage dict inside a Celery (protocol 2) message as kombu's Redis transport
    stores it: a JSON envelope whose body is base64 JSON `[args, kwargs, embed]`."""
    envelope = orjson.loads(raw)
    body = envelope["body"]
    if envelope.get("properties", {}).get("body_encoding") == "base64":
        body = base64.b64decode(body)
    args = orjson.loads(body)[0]
    return dict(args[0])


def result_entry(message: ResultMessage) -> bytes:
    """The Redis list entry kombu's producer writes when a worker publishes `message`
    (services.worker.messages.publish: JSON body, base64 in a JSON envelope routed by the
    `results` exchange), built here directly: kombu routes each publish to the results exchange
    with a Redis round trip of its own (a new client and SMEMBERS of the exchange's bindings)
    and copies the message with `asdict`, which cost this one process about half a millisecond
    per message: a thousand workers' share of the machine, not one worker's."""
    body = base64.b64encode(orjson.dumps(dict(message.__dict__))).decode()
    return orjson.dumps({
        "body": body, "content-encoding": "utf-8", "content-type": "application/json",
        "headers": {}, "properties": {
            "delivery_mode": 2, "priority": 0, "body_encoding": "base64",
            "delivery_info": {"exchange": RESULTS_EXCHANGE.name, "routing_key": RESULTS_QUEUE},
            "delivery_tag": str(uuid.uuid4())}})  # bytes: what redis-py sends as is


def answer_all(client: redis.Redis, answered: list[tuple[dict[str, Any], float]]) -> None:
    """Publish the SIMULATED results of (task, wall seconds) pairs: the messages a worker's
    `services.worker.messages.publish` sends, to the list the results exchange routes them
    to, in one pipelined round trip (one process plays a thousand workers, so it must not pay
    one trip each)."""
    if not answered:
        return
    with client.pipeline(transaction=False) as pipe:
        for task, wall_s in answered:
            result = SIM_TASKS[task["kind"]](dict(task["payload"]))
            message = ResultMessage(attempt_id=int(task["attempt_id"]), kind=task["kind"],
                                    result=result, worker="simulated", wall_s=wall_s)
            pipe.lpush(RESULTS_QUEUE, result_entry(message))
        pipe.execute()


class Fleet:
    """The simulated workers' state: GPU tasks in service, ordered by when they finish."""

    def __init__(self, broker_url: str, gpus: int, gpu_queue: str, median_s: float,
                 sigma: float, seed: int) -> None:
        self.client = redis.Redis.from_url(broker_url)
        self.gpus, self.gpu_queue = gpus, gpu_queue
        self.rng = np.random.default_rng(seed)
        self.median_s, self.sigma = median_s, sigma
        self.running: list[tuple[float, int, dict[str, Any], float]] = []  # (end, n, task, start)
        self.spans: list[tuple[float, float]] = []
        self.taken = 0

    def take(self, queue: str, count: int) -> list[bytes]:
        """Up to `count` raw task messages from a queue (one RPOP)."""
        return cast(list[bytes], self.client.rpop(queue, count) or []) if count > 0 else []

    def turn(self) -> bool:
        """Finish due GPU tasks, take new ones into free slots, answer instant ones."""
        now = time.monotonic()
        answered: list[tuple[dict[str, Any], float]] = []
        while self.running and self.running[0][0] <= now:
            end, _, task, start = heapq.heappop(self.running)
            answered.append((task, end - start))
            self.spans.append((start, end))
        free = self.gpus - len(self.running)
        taken = self.take(self.gpu_queue, free)
        for raw in taken:
            duration = float(self.rng.lognormal(np.log(self.median_s), self.sigma))
            self.taken += 1
            heapq.heappush(self.running, (now + duration, self.taken, task_of(raw), now))
        for queue in INSTANT_QUEUES:
            answered += [(task_of(raw), 0.0) for raw in self.take(queue, 500)]
        answer_all(self.client, answered)
        return bool(answered or taken)


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGTERM, then write the GPU busy spans."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--broker", required=True)
    parser.add_argument("--gpus", type=int, required=True)
    parser.add_argument("--queue", default="gpu.h100")
    parser.add_argument("--median-s", type=float, default=3.0)
    parser.add_argument("--sigma", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    fleet = Fleet(args.broker, args.gpus, args.queue, args.median_s, args.sigma, args.seed)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    args.out.with_suffix(".ready").write_text("ready")  # imports done, SIGTERM handled
    while not stopping:
        if not fleet.turn():
            time.sleep(0.005)
    args.out.write_text(json.dumps({"spans": fleet.spans, "stopped_at": time.monotonic(),
                                    "in_service_since": [s for _, _, _, s in fleet.running]}))


if __name__ == "__main__":
    main()
