"""How the scheduler hands work to workers and gets results back.

The engine commits an attempt row first and only then calls `Dispatcher.submit`; results come
back as `TaskResult`s that the scheduler drains and ingests (at most once per attempt id).
`EmbeddedDispatcher` runs the same `kernelband.scheduling.tasks` functions on thread pools; the Celery
dispatcher (services/worker) sends them to named queues instead.
"""

from __future__ import annotations

import importlib
import logging
import os
import queue
import threading
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kernelband.scheduling.gpu_pool import GpuQueuePool, urgency

log = logging.getLogger(__name__)

QUEUE_LLM = "llm"
QUEUE_CPU = "cpu"
QUEUE_RESULTS = "results"
TASK_KINDS = ("generate", "compile", "profile", "verify")

TaskFunction = Callable[[dict[str, Any]], dict[str, Any]]


GPU_QUEUE_PREFIX = "gpu."


def gpu_queue(target: str) -> str:
    """The queue of the GPU workers of one target type, e.g. `gpu.h100`."""
    return f"{GPU_QUEUE_PREFIX}{target}"


def queue_for(kind: str, target: str) -> str:
    """Queue of a task kind; the `cpu` target measures (estimates) on the CPU queue."""
    if kind not in TASK_KINDS:
        raise ValueError(f"unknown task kind {kind!r}; expected one of {', '.join(TASK_KINDS)}")
    if kind == "generate":
        return QUEUE_LLM
    if kind == "compile" or target == "cpu":
        return QUEUE_CPU
    return gpu_queue(target)


@dataclass(frozen=True)
class TaskMessage:
    """One attempt sent to a worker: everything it needs travels in `payload`."""

    attempt_id: int
    kind: str
    queue: str
    payload: dict[str, Any] = field(default_factory=dict)
    task_id: str = ""  # chosen by the engine and stored before submit (idempotent re-sends)

    def to_dict(self) -> dict[str, Any]:
        return {"attempt_id": self.attempt_id, "kind": self.kind, "queue": self.queue,
                "payload": self.payload, "task_id": self.task_id}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskMessage:
        return cls(int(data["attempt_id"]), str(data["kind"]), str(data["queue"]),
                   dict(data.get("payload") or {}), str(data.get("task_id") or ""))


@dataclass(frozen=True)
class TaskResult:
    """A worker's answer for one attempt; `result` is the task function's plain dict."""

    attempt_id: int
    result: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"attempt_id": self.attempt_id, "result": self.result}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskResult:
        return cls(int(data["attempt_id"]), dict(data["result"]))


def task_error_result(kind: str, exc: BaseException) -> dict[str, Any]:
    """The result dict of a task body that raised: a failure with its reason, never silence."""
    tail = "".join(traceback.format_exception(exc))[-2000:]
    return {"ok": False, "kind": kind, "reason": f"task_error:{type(exc).__name__}",
            "message": str(exc)[:500], "traceback": tail}


# The module of each kind's body. Imported when a task of that kind first runs, so a worker
# loads only what its kind needs: an LLM worker never loads the sandboxed checks and torch.
TASK_MODULES = {"generate": "kernelband.scheduling.generate_task",
                **dict.fromkeys(("compile", "profile", "verify"),
                                "kernelband.scheduling.candidate_tasks")}


def task_function(kind: str) -> TaskFunction:
    """The task body of a kind, from its module in `TASK_MODULES` (imported on first use)."""
    if kind not in TASK_KINDS:
        raise ValueError(f"unknown task kind {kind!r}; expected one of {', '.join(TASK_KINDS)}")
    return getattr(importlib.import_module(TASK_MODULES[kind]), kind)  # type: ignore[no-any-return]


class Dispatcher:
    """Extension point: how attempts reach workers and how their results come back."""

    def submit(self, task: TaskMessage) -> str:
        """Send one task; returns a task id. Called only after the attempt row is committed."""
        raise NotImplementedError("Must provide submit(task) -> task id")

    def submit_many(self, tasks: Sequence[TaskMessage]) -> int:
        """Send tasks in order; returns how many could not be sent (their leases bring them
        back). A dispatcher that can send many in one broker round trip overrides this."""
        unsent = 0
        for task in tasks:
            try:
                self.submit(task)
            except Exception:  # broker down: the lease brings the attempt back
                log.exception("could not submit attempt %s; it will be retried after its lease",
                              task.attempt_id)
                unsent += 1
        return unsent

    def drain(self, timeout_s: float = 0.0, max_items: int = 1000) -> list[TaskResult]:
        """Results that arrived, waiting up to `timeout_s` for the first one."""
        raise NotImplementedError("Must provide drain(timeout_s, max_items) -> results")

    def waiting(self, queue: str) -> int | None:
        """Tasks sent to `queue` that no worker has taken yet; None when it cannot be known.

        The scheduler renews the lease of an untaken try while its queue is not empty
        (kernelband/scheduling/leases.py), so a backlog does not look like lost work.
        """
        return None

    def close(self) -> None:
        """Release threads or connections; pending work may be abandoned (leases recover it)."""


class InboxDispatcher(Dispatcher):
    """A dispatcher whose results land in an in-process inbox (thread-safe queue)."""

    def __init__(self) -> None:
        self._inbox: queue.Queue[TaskResult] = queue.Queue()

    def deliver(self, attempt_id: int, result: dict[str, Any]) -> None:
        """Put a result into the inbox (also used by tests to replay a duplicate)."""
        self._inbox.put(TaskResult(attempt_id, result))

    def drain(self, timeout_s: float = 0.0, max_items: int = 1000) -> list[TaskResult]:
        results: list[TaskResult] = []
        try:
            results.append(self._inbox.get(timeout=timeout_s) if timeout_s > 0
                           else self._inbox.get_nowait())
        except queue.Empty:
            return results
        while len(results) < max_items:
            try:
                results.append(self._inbox.get_nowait())
            except queue.Empty:
                break
        return results


def embedded_pool_sizes(parallelism: int, targets: Sequence[str], gpu_tasks_per_device: int) -> tuple[int, int]:
    """(threads of the llm and cpu queues' pool, tasks at once per GPU queue) of an in-process run.

    A run with a GPU target also compiles and checks on the CPU while its GPU measures, so its
    CPU pool gets half the node's cores at least. A CPU-target run keeps one thread per target
    and parallel slot (two at least): its estimates are themselves CPU work.
    """
    workers = max(2, parallelism * len(targets))
    if all(target == "cpu" for target in targets):
        return workers, 1
    return max(workers, (os.cpu_count() or 2) // 2), gpu_tasks_per_device


class EmbeddedDispatcher(InboxDispatcher):
    """Runs `kernelband.scheduling.tasks` bodies on thread pools (candidate code still runs sandboxed).

    Tasks of the llm and cpu queues share one pool of `max_workers` threads; each `gpu.*` queue
    has its own pool of `gpu_tasks` threads, so a compile never waits behind a profile task or
    the other way round. `gpu_tasks=1` runs one task at a time per GPU queue, as `celery -c 1`
    does per GPU; more may overlap because the part that must have the GPU alone, a paired
    measurement's timed rounds, takes it exclusively (kernelband/sandbox/gpu_lock.py). A GPU
    queue's free slot takes a waiting candidate before an original's baseline, and one slot
    stays for candidates (kernelband/scheduling/gpu_pool.py says why).
    """

    def __init__(self, max_workers: int = 2,
                 functions: Mapping[str, TaskFunction] | None = None, gpu_tasks: int = 1) -> None:
        super().__init__()
        if gpu_tasks < 1:
            raise ValueError(f"gpu_tasks must be at least 1 (tasks at once per GPU queue), "
                             f"got {gpu_tasks}")
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="kb-task")
        self._gpu_tasks = gpu_tasks
        self._gpu_pools: dict[str, GpuQueuePool] = {}  # made when a queue is first used
        self._closed = False
        self._functions = dict(functions or {})
        self._lock = threading.Lock()
        self._queued: dict[str, int] = {}  # submitted, not yet started, per queue
        self.submitted: dict[str, int] = {}  # attempts per kind, for reports

    def submit(self, task: TaskMessage) -> str:
        task_id = task.task_id or f"embedded-{uuid.uuid4().hex[:12]}"
        pool = self._gpu_pool(task.queue) if task.queue.startswith(GPU_QUEUE_PREFIX) else None
        with self._lock:
            self.submitted[task.kind] = self.submitted.get(task.kind, 0) + 1
            self._queued[task.queue] = self._queued.get(task.queue, 0) + 1
        if pool is None:
            self._pool.submit(self._run, task)
        else:  # candidates ahead of originals' baselines (kernelband/scheduling/gpu_pool.py)
            pool.submit(urgency(task.payload), lambda: self._run(task))
        return task_id

    def waiting(self, queue: str) -> int | None:
        with self._lock:
            return self._queued.get(queue, 0)

    def _gpu_pool(self, queue: str) -> GpuQueuePool:
        with self._lock:
            if self._closed:  # as the shut-down shared pool would answer
                raise RuntimeError("cannot schedule new futures after shutdown")
            pool = self._gpu_pools.get(queue)
            if pool is None:
                pool = self._gpu_pools[queue] = GpuQueuePool(self._gpu_tasks, queue)
            return pool

    def _run(self, task: TaskMessage) -> None:
        with self._lock:
            self._queued[task.queue] -= 1
        # like a Celery worker: the task left its queue, so its lease starts counting now
        self.deliver(task.attempt_id, {"heartbeat": True, "task_id": task.task_id})
        try:
            function = self._functions.get(task.kind) or task_function(task.kind)
            result = function(task.payload)
        except Exception as exc:  # a task body bug becomes a failed attempt, not a hang
            result = task_error_result(task.kind, exc)
        self.deliver(task.attempt_id, result)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            gpu_pools = list(self._gpu_pools.values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for pool in gpu_pools:
            pool.shutdown()


class InlineDispatcher(InboxDispatcher):
    """Runs each task synchronously inside `submit`: deterministic order, for tests and debugging."""

    def __init__(self, functions: Mapping[str, TaskFunction] | None = None,
                 record: bool = True) -> None:
        super().__init__()
        self._functions = dict(functions or {})
        # Every message sent, for tests to read; `record=False` for long runs (a benchmark's
        # hundreds of thousands of messages kept alive slowed every later pass of the process).
        self.record = record
        self.submitted: list[TaskMessage] = []

    def submit(self, task: TaskMessage) -> str:
        if self.record:
            self.submitted.append(task)
        try:
            function = self._functions.get(task.kind) or task_function(task.kind)
            result = function(task.payload)
        except Exception as exc:
            result = task_error_result(task.kind, exc)
        self.deliver(task.attempt_id, result)
        return task.task_id or f"inline-{task.attempt_id}"
