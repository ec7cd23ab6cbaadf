"""The Celery app of the distributed deployment: `celery -A services.worker.app worker -Q cpu`.

Workers hold no database credentials: everything a task needs travels in its message and its
result goes back as a message on the `results` queue (see services/worker/messages.py).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery, signals
from kombu import Exchange, Queue

from kernelband.config import Settings, get_settings
from services.worker.queues import TASK_QUEUES

log = logging.getLogger(__name__)

# (soft, hard) seconds per task kind; the soft limit lets the task answer "timeout" itself.
TIME_LIMITS: dict[str, tuple[int, int]] = {
    "generate": (600, 660),  # LLM calls with retries
    "compile": (240, 300),
    "profile": (900, 960),
    "verify": (900, 960),
}
# A message unacked for longer than this is redelivered by Redis: it must exceed every hard
# limit, or a slow but healthy task would run twice.
VISIBILITY_TIMEOUT_S = 2 * max(hard for _, hard in TIME_LIMITS.values()) + 600
DATABASE_URL_VARIABLE = "KERNELBAND_DATABASE_URL"


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery settings DESIGN.md asks for, from the service Settings."""
    transport = {"visibility_timeout": VISIBILITY_TIMEOUT_S}
    return {
        "broker_url": settings.broker_url,
        "result_backend": settings.result_backend_url,
        "broker_transport_options": dict(transport),
        "result_backend_transport_options": dict(transport),
        "broker_connection_retry_on_startup": True,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_create_missing_queues": False,
        "task_queues": [Queue(name, Exchange(name, type="direct"), routing_key=name) for name in TASK_QUEUES],
        "task_default_queue": "cpu",
        # Results travel on the results queue; the Celery result backend stays empty.
        "task_ignore_result": True,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "worker_hijack_root_logger": False,
        "worker_send_task_events": False,
    }


def make_app(settings: Settings | None = None) -> Celery:
    """A Celery app configured from `settings` (the environment by default)."""
    celery_app = Celery("kernelband", include=["services.worker.tasks", "services.worker.heartbeat"])
    celery_app.conf.update(celery_config(settings or Settings()))
    return celery_app


app = make_app()


@signals.worker_init.connect
def _drop_database_credentials(**_: Any) -> None:
    """Remove the database URL before any pool child or sandbox child is forked."""
    if os.environ.pop(DATABASE_URL_VARIABLE, None) is not None:
        log.warning(
            "%s was set in the worker environment and has been removed: workers must not "
            "hold database credentials; unset it for worker processes",
            DATABASE_URL_VARIABLE,
        )
    get_settings.cache_clear()
