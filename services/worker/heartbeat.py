"""Periodic heartbeats from the worker's main process to the scheduler (results queue).

The GPU name comes from `nvidia-smi`, never from torch: the worker parent must not initialise
CUDA, or its forked pool children could not use the GPU.
"""

from __future__ import annotations

import logging
import os
import platform
import shutil
import subprocess
import threading
import time
from dataclasses import replace
from importlib import metadata
from typing import Any

from celery import signals

from kernelband.config import get_settings
from kernelband.sandbox.jail import isolation_level
from services.worker import messages
from services.worker.app import DATABASE_URL_VARIABLE, app
from services.worker.queues import target_of_queue

log = logging.getLogger(__name__)

_stop = threading.Event()


def heartbeat_interval_s() -> float:
    """Seconds between heartbeats (Settings.heartbeat_interval_s, KERNELBAND_HEARTBEAT_INTERVAL_S):
    the scheduler counts a worker gone after `Settings.worker_missed_beats` of them."""
    return max(get_settings().heartbeat_interval_s, 0.1)


def runner_isolation() -> str:
    """How this node's runners confine submitted code (e.g. `jail:bwrap`, `weak:setuid`)."""
    try:
        return isolation_level()
    except Exception as exc:  # noqa: BLE001 - the fleet view shows the failure, the worker runs on
        log.warning("runner isolation level unknown: %s", exc)
        return f"unknown:{type(exc).__name__}"


def package_versions() -> dict[str, str]:
    """Installed torch/triton/kernelband versions, read without importing them."""
    versions = {"python": platform.python_version()}
    for name in ("torch", "triton", "kernelband", "celery"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "missing"
    return versions


def gpu_name() -> str | None:
    """The first visible GPU's name from nvidia-smi, or None on a machine without one."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    names = [line.strip() for line in out.splitlines() if line.strip()]
    return names[0] if names else None


def build_heartbeat(worker: str, queues: list[str]) -> messages.Heartbeat:
    """A heartbeat describing this worker."""
    targets = [t for t in (target_of_queue(q) for q in queues) if t is not None]
    return messages.Heartbeat(
        worker=worker,
        queue=",".join(sorted(queues)),
        target=targets[0] if targets else None,
        gpu_name=gpu_name() if targets else None,
        versions=package_versions(),
        holds_database_credentials=DATABASE_URL_VARIABLE in os.environ,
        interval_s=heartbeat_interval_s(),
        isolation=runner_isolation(),
    )


def _beat_forever(worker: str, queues: list[str]) -> None:
    beat = build_heartbeat(worker, queues)
    while not _stop.is_set():
        try:
            with app.connection_for_write() as connection:
                messages.publish(connection, replace(beat, sent_at=time.time()))
        except Exception as exc:  # noqa: BLE001 - a missed beat must not kill the worker
            log.warning("heartbeat not sent: %s", exc)
        _stop.wait(beat.interval_s)


@signals.worker_ready.connect
def _start_heartbeats(sender: Any = None, **_: Any) -> None:
    worker = str(getattr(sender, "hostname", None) or platform.node())
    queues = sorted(app.amqp.queues.consume_from or app.amqp.queues)
    _stop.clear()
    threading.Thread(target=_beat_forever, args=(worker, queues), name="kb-heartbeat",
                     daemon=True).start()


@signals.worker_shutdown.connect
def _stop_heartbeats(**_: Any) -> None:
    _stop.set()
