"""Queue names shared by the workers, the dispatcher and docker-compose.

The routing rule itself (`queue_for`) lives in kernelband.scheduling.dispatch; this module lists the
queues a Celery worker may consume.
"""

from __future__ import annotations

from kernelband.scheduling.dispatch import QUEUE_CPU, QUEUE_LLM, QUEUE_RESULTS, gpu_queue, queue_for

TARGETS: tuple[str, ...] = ("rtx4090", "a100", "h100", "h200", "cpu")
GPU_TARGETS: tuple[str, ...] = ("rtx4090", "a100", "h100", "h200")

LLM_QUEUE = QUEUE_LLM
CPU_QUEUE = QUEUE_CPU
# Only the scheduler consumes this queue; it is a plain kombu queue, never a Celery task queue,
# so a worker started without -Q can not steal results.
RESULTS_QUEUE = QUEUE_RESULTS
GPU_QUEUES: dict[str, str] = {target: gpu_queue(target) for target in GPU_TARGETS}

# Every queue a Celery worker may consume (task_create_missing_queues=False refuses others);
# the cpu target's estimates run on the cpu queue (see kernelband.scheduling.dispatch.queue_for).
TASK_QUEUES: tuple[str, ...] = (LLM_QUEUE, CPU_QUEUE, *GPU_QUEUES.values())

__all__ = ["CPU_QUEUE", "GPU_QUEUES", "GPU_TARGETS", "LLM_QUEUE", "RESULTS_QUEUE", "TARGETS",
           "TASK_QUEUES", "queue_for", "target_of_queue"]


def target_of_queue(queue: str) -> str | None:
    """The GPU target a queue serves, or None for llm/cpu."""
    for target, name in GPU_QUEUES.items():
        if name == queue:
            return target
    return None
