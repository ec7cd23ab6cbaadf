"""CeleryDispatcher: attempts go to named Celery queues, results come back on `results`.

Choice (see DESIGN.md): results are plain kombu messages on the `results` queue, read by this
dispatcher in the scheduler process only (no Celery worker consumes them), many per Redis round
trip in kombu's unacknowledged bookkeeping (`results_queue.ResultsQueueReader`).
A result is acknowledged only when the scheduler calls `ack` after committing its effect, so a
scheduler crash leaves it in Redis; the next leader calls `recover_unacked` at takeover and the
at-most-once-per-attempt rule absorbs any duplicate.

The results channel keeps its unacknowledged messages under its own Redis keys, so its short
visibility timeout never redelivers a Celery task that is still running on a worker.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import orjson
from celery import Celery
from kombu import Connection
from kombu.exceptions import ChannelError
from kombu.message import Message

from kernelband.config import Settings
from kernelband.scheduling.dispatch import Dispatcher, TaskMessage, TaskResult
from kernelband.scheduling.results import LeaseBeat
from services.scheduler.liveness import Liveness, WorkerSeen
from services.scheduler.results_queue import ResultsQueueReader
from services.scheduler.task_entries import KWARGS_REPR, TaskEntries
from services.scheduler.workers import note_current
from services.worker.app import make_app
from services.worker.messages import RESULTS, Heartbeat, MessageFormatError, parse_message
from services.worker.tasks import TASK_NAMES

log = logging.getLogger(__name__)

RESULTS_UNACKED_KEYS = {
    "unacked_key": "kernelband.results.unacked",
    "unacked_index_key": "kernelband.results.unacked_index",
    "unacked_mutex_key": "kernelband.results.unacked_mutex",
}
# A leader that holds a result this long without committing it is presumed dead.
RESULTS_VISIBILITY_S = 120
POLL_STEP_S = 0.05
# A result whose ingestion failed this many times in a row is dropped (and logged): the
# attempt's lease then re-dispatches it, so one poison message can not stall every job.
MAX_REDELIVERIES = 5


def _delivery(raw: bytes) -> tuple[str | None, str | None]:
    """(Celery task id, queue) of an entry of kombu's `unacked` hash (`[message, exchange,
    routing key]`; a task's routing key is its queue name)."""
    try:
        message, _, routing_key = json.loads(raw)
        return str(message["headers"]["id"]), str(routing_key)
    except (ValueError, KeyError, IndexError, TypeError):
        return None, None


def _task_id(raw: bytes) -> str | None:
    return _delivery(raw)[0]


def _attempt_of(task_id: str | None) -> int | None:
    """The attempt a task id names (`kb-<attempt>-<try>`, `attempts.claim_pending`)."""
    parts = (task_id or "").split("-")
    if len(parts) == 3 and parts[0] == "kb" and parts[1].isdigit():
        return int(parts[1])
    return None


def results_connection(broker_url: str, visibility_timeout: float = RESULTS_VISIBILITY_S) -> Connection:
    """A broker connection whose unacked bookkeeping is private to the results queue."""
    options = {**RESULTS_UNACKED_KEYS, "visibility_timeout": visibility_timeout}
    return Connection(broker_url, transport_options=options)


def decoded_body(message: Message) -> Any:
    """The body of a results message: orjson for the plain JSON workers send (kombu's JSON
    decoder, with its hook for encoded types, took about a tenth of the scheduler's CPU at a
    thousand results a second); kombu's own decoding for anything else (another content type,
    a type kombu encoded (`__type__`), what orjson refuses, such as NaN)."""
    body = message.body
    if (message.content_type == "application/json" and isinstance(body, bytes)
            and b'"__type__"' not in body):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    return message.decode()


class CeleryDispatcher(Dispatcher):
    """Sends TaskMessages to Celery queues; drains result and heartbeat messages."""

    def __init__(self, settings: Settings, app: Celery | None = None) -> None:
        self._app = app or make_app(settings)
        self._broker_url = settings.broker_url
        self._connection = results_connection(settings.broker_url)
        self._queue = RESULTS(self._connection.default_channel)
        self._queue.declare()
        self._reader = ResultsQueueReader(self._connection.default_channel, self._queue.name)
        self._pending: dict[int, list[Message]] = defaultdict(list)
        self._failures: dict[int, int] = defaultdict(int)  # failed ingestions per attempt
        self._heartbeats: list[Heartbeat] = []
        self._current: dict[str, int | None] = {}  # worker -> attempt it is on (fleet page)
        self._current_changed: set[str] = set()
        self.liveness = Liveness(settings.heartbeat_interval_s, settings.worker_missed_beats)
        self.backlogged = False  # the last drain stopped at its limit: beats may be queued
        self.submitted: dict[str, int] = {}  # attempts per kind, for reports
        self._declared: set[str] = set()  # queues declared through this dispatcher
        self._entries = TaskEntries(self._app)

    def submit(self, task: TaskMessage) -> str:
        """Send one attempt to its queue; an unknown queue raises (no queue is ever created)."""
        with self._app.producer_or_acquire() as producer:
            return self._send(task, producer)

    def submit_many(self, tasks: Sequence[TaskMessage]) -> int:
        """Send tasks with their Redis writes in one pipeline (`task_entries`), so a pass's
        attempts cost one round trip, not one each; a queue's first task goes through
        `send_task`, which declares the queue. Returns how many may not have been sent: when
        the pipeline fails, delivery is uncertain and every attempt of it is left to its lease
        (a duplicate delivery is absorbed by the at-most-once rule)."""
        if not tasks:
            return 0
        try:
            with self._app.producer_or_acquire() as producer:
                entries: list[tuple[str, str]] = []
                for task in tasks:
                    if task.queue in self._declared:
                        entries.append((task.queue, self._entry(task)))
                    else:
                        self._send(task, producer)
                if entries:
                    # one LPUSH per queue with its entries in order: the list ends as one
                    # LPUSH per entry left it, without a command per task to pack and answer
                    by_queue: dict[str, list[str]] = defaultdict(list)
                    for queue, entry in entries:
                        by_queue[queue].append(entry)
                    with producer.channel.client.pipeline(transaction=False) as pipe:
                        for queue, values in by_queue.items():
                            pipe.lpush(queue, *values)
                        pipe.execute()
        except Exception:
            log.exception("could not submit %s attempts; they will be retried after their "
                          "leases", len(tasks))
            return len(tasks)
        return 0

    def _entry(self, task: TaskMessage) -> str:
        self.submitted[task.kind] = self.submitted.get(task.kind, 0) + 1
        return self._entries.entry(TASK_NAMES[task.kind], self._task_id(task), [task.to_dict()],
                                   task.queue, self._argsrepr(task))

    @staticmethod
    def _task_id(task: TaskMessage) -> str:
        return task.task_id or f"attempt-{task.attempt_id}-{uuid.uuid4().hex[:8]}"

    @staticmethod
    def _argsrepr(task: TaskMessage) -> str:
        return f"[attempt {task.attempt_id} {task.kind}]"

    def _send(self, task: TaskMessage, producer: Any) -> str:
        task_id = self._task_id(task)
        # Results come back on the results queue, never through Celery's result backend, so
        # no per-task subscription to it (ignore_result); argsrepr: a short label instead of
        # Celery's repr of the whole payload (candidate source code).
        # A queue is declared with its first task only (declare=None: Celery's default, declare
        # it); declaring it again with every task copied and bound the queue each time, a sixth
        # of the send.
        declare: list[Any] | None = [] if task.queue in self._declared else None
        self._app.send_task(TASK_NAMES[task.kind], args=[task.to_dict()], queue=task.queue,
                            task_id=task_id, producer=producer, ignore_result=True,
                            argsrepr=self._argsrepr(task), kwargsrepr=KWARGS_REPR,
                            declare=declare)
        self._declared.add(task.queue)
        self.submitted[task.kind] = self.submitted.get(task.kind, 0) + 1
        return task_id

    def drain(self, timeout_s: float = 0.0, max_items: int = 1000) -> list[TaskResult]:
        """Results that arrived (unacknowledged until `ack`), waiting up to `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        results: list[TaskResult] = []
        settled: list[Message] = []  # acknowledged at once: nothing to commit for them
        while len(results) < max_items:
            messages = self._reader.take(max_items - len(results))  # one round trip
            for message in messages:
                result = self._accept(message, settled)
                if result is not None:
                    results.append(result)
            if messages:
                continue  # heartbeats only, or more may have arrived: look again at once
            if results or time.monotonic() >= deadline:
                break
            time.sleep(POLL_STEP_S)
        self.backlogged = len(results) >= max_items
        self._reader.ack_all(settled)
        return results

    def _accept(self, message: Message, settled: list[Message]) -> TaskResult | None:
        try:
            parsed = parse_message(decoded_body(message))
        except (MessageFormatError, ValueError) as exc:
            log.error("dropping a malformed results message: %s", exc)
            settled.append(message)  # redelivering it would fail the same way forever
            return None
        if isinstance(parsed, Heartbeat):
            self.liveness.heard(parsed.worker, parsed.interval_s,
                                queues=tuple(q for q in parsed.queue.split(",") if q))
            self._heartbeats.append(parsed)
            settled.append(message)  # a lost heartbeat is replaced by the next one
            return None
        if self._failures[parsed.attempt_id] >= MAX_REDELIVERIES:
            log.error("dropping the result of attempt %s after %s failed ingestions; its lease "
                      "will re-dispatch it", parsed.attempt_id, MAX_REDELIVERIES)
            self._failures.pop(parsed.attempt_id)
            settled.append(message)
            return None
        self._pending[parsed.attempt_id].append(message)
        beat = LeaseBeat.read(parsed.result)
        if beat is not None:
            self.liveness.took(parsed.worker, parsed.attempt_id, beat.task_id)
        else:
            self.liveness.answered(parsed.worker, parsed.attempt_id)
        if note_current(self._current, parsed.worker, parsed.attempt_id, beat is not None):
            self._current_changed.add(parsed.worker)
        meta = {"name": parsed.worker, "wall_s": parsed.wall_s, "sent_at": parsed.sent_at}
        return TaskResult(parsed.attempt_id, {**parsed.result, "_worker": meta})

    def ack(self, results: list[TaskResult]) -> None:
        """Acknowledge results whose effect is committed; each delivery of them is removed."""
        self._reader.ack_all([message for result in results
                              for message in self._pending.pop(result.attempt_id, [])])

    def ack_drained(self) -> int:
        """Acknowledge every result drained so far (call after their transactions committed)."""
        messages = [m for batch in self._pending.values() for m in batch]
        self._failures.clear()
        self._pending.clear()
        self._reader.ack_all(messages)
        return len(messages)

    def requeue_drained(self, count_failure: bool = True) -> int:
        """Put every drained, unacknowledged result back on the queue (after a failed step).

        `count_failure=False` when the database was merely unreachable: that is no fault of
        the messages. Results that can not be requeued (broker down) stay unacknowledged in
        Redis and come back at the next takeover.
        """
        pending, self._pending = self._pending, defaultdict(list)
        for attempt_id, batch in pending.items():
            self._failures[attempt_id] += int(count_failure)
            for message in batch:
                try:
                    message.requeue()
                except Exception as exc:  # broker away: recover_unacked brings it back later
                    log.warning("could not requeue the result of attempt %s: %s", attempt_id, exc)
        return sum(len(batch) for batch in pending.values())

    def reconnect(self) -> None:
        """Drop a broken broker connection and open a new one (after a broker error)."""
        self._pending.clear()  # those deliveries died with the old channel; recovery re-sends
        self._declared.clear()  # a restarted broker may have lost its declarations
        try:
            self._connection.release()
        except Exception as exc:  # already broken
            log.debug("closing the broken results connection: %s", exc)
        self._connection = results_connection(self._broker_url)
        self._queue = RESULTS(self._connection.default_channel)
        self._queue.declare()
        self._reader = ResultsQueueReader(self._connection.default_channel, self._queue.name)

    def has_heartbeats(self) -> bool:
        """True when heartbeats (or changes of what a worker is on) wait to be recorded."""
        return bool(self._heartbeats or self._current_changed)

    def take_heartbeats(self) -> list[Heartbeat]:
        """Heartbeats received since the last call."""
        beats, self._heartbeats = self._heartbeats, []
        return beats

    def take_current(self) -> dict[str, int | None]:
        """Workers whose current attempt changed since the last call (None: it finished)."""
        changed, self._current_changed = self._current_changed, set()
        return {name: self._current.get(name) for name in sorted(changed)}

    def take_gone_workers(self) -> dict[str, WorkerSeen]:
        """Workers silent for their missed beats, with the tries they held (none while the
        results queue is backlogged: their beats may be waiting in it)."""
        return {} if self.backlogged else self.liveness.take_gone()

    def unreported_deliveries(self, queues: set[str], older_than_s: float) -> dict[int, str]:
        """Tries of these queues a consumer took (kombu's `unacked` set) `older_than_s` ago or
        more, with no lease beat from a live worker: attempt id -> task id. A worker beats as
        soon as it starts a task, so such a delivery belongs to a consumer that died."""
        live = self.liveness.held_by_live()
        with self._app.connection_for_write() as connection:
            channel = connection.default_channel
            client, qos = channel.client, channel.qos
            tags = client.zrangebyscore(qos.unacked_index_key, 0, time.time() - older_than_s)
            raws = client.hmget(qos.unacked_key, tags) if tags else []
        tries: dict[int, str] = {}
        for raw in raws:
            task_id, queue = _delivery(raw) if raw else (None, None)
            attempt_id = _attempt_of(task_id)
            if attempt_id is not None and queue in queues and attempt_id not in live:
                tries[attempt_id] = str(task_id)
        return tries

    def forget_deliveries(self, task_ids: Sequence[str]) -> int:
        """Drop these tasks' deliveries from the broker's unacknowledged set.

        A worker killed with `-9` never acknowledges nor restores the task it had taken
        (acks_late): kombu keeps the delivery in Redis's `unacked` hash until another
        consumer finds it older than the visibility timeout (`VISIBILITY_TIMEOUT_S`, 42
        minutes: longer than any task may run) and redelivers it. The attempt has been sent
        again as a new try by then; forgetting the old delivery spares running it twice."""
        wanted = set(task_ids)
        if not wanted:
            return 0
        with self._app.connection_for_write() as connection:
            channel = connection.default_channel
            client, qos = channel.client, channel.qos
            tags = [tag for tag, raw in client.hscan_iter(qos.unacked_key)
                    if _task_id(raw) in wanted]
            if tags:
                with client.pipeline(transaction=False) as pipe:
                    pipe.hdel(qos.unacked_key, *tags)
                    pipe.zrem(qos.unacked_index_key, *tags)
                    pipe.execute()
        return len(tags)

    def recover_unacked(self) -> int:
        """Put back every result a dead leader took but never acknowledged; returns how many."""
        with results_connection(self._broker_url, visibility_timeout=0) as connection:
            client = connection.default_channel.client
            before = int(client.zcard(RESULTS_UNACKED_KEYS["unacked_index_key"]))
            connection.default_channel.qos.restore_visible(num=100_000, interval=1)
        return before

    def close(self) -> None:
        """Close the connection; unacknowledged results go back to the queue."""
        self._pending.clear()
        self._connection.release()

    def waiting(self, queue: str) -> int | None:
        """Messages still in a task queue (workers' prefetched tasks are not counted)."""
        try:
            with self._app.connection_for_read() as connection:
                _, count, _ = connection.default_channel.queue_declare(queue=queue, passive=True)
            return int(count)
        except ChannelError:  # Redis drops an empty list, so an empty queue "does not exist"
            return 0
        except Exception as exc:  # broker away: treat the try as lost
            log.warning("could not read the depth of queue %s: %s", queue, exc)
            return None

    def queue_depth(self) -> dict[str, Any]:
        """Messages waiting in the results queue (for diagnostics)."""
        _, count, _ = self._queue.queue_declare(passive=True)
        return {"results": count}
