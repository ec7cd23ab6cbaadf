"""Embedded mode: the scheduler loop and in-process workers running beside the API."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.scheduling.dispatch import EmbeddedDispatcher
from kernelband.scheduling.pipeline import EngineContext, step
from services.api.schemas import WorkerOut
from services.api.teams import register_bootstrap_token as register_bootstrap_token

log = logging.getLogger(__name__)


class EmbeddedScheduler:
    """Runs `kernelband.scheduling.pipeline.step` in a background thread with a thread-pool dispatcher."""

    def __init__(self, factory: sessionmaker[Session], settings: Settings, workers: int = 2) -> None:
        self.dispatcher = EmbeddedDispatcher(max_workers=workers)
        self.context = EngineContext(factory=factory, dispatcher=self.dispatcher, settings=settings)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kb-scheduler", daemon=True)
        self._workers = workers
        self._last_step = time.monotonic()
        self._last_step_at = datetime.now(UTC)
        self.steps = 0

    def start(self) -> None:
        """Start the loop (returns at once)."""
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the loop to stop, wait for it, and release the worker threads."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        self.dispatcher.close()

    def _run(self) -> None:
        poll = self.context.settings.poll_interval_s
        while not self._stop.is_set():
            try:
                step(self.context, drain_timeout_s=poll)
                self.steps += 1
                self._last_step = time.monotonic()
                self._last_step_at = datetime.now(UTC)
            except Exception:  # one bad step must not stop the service; the next one retries
                log.exception("scheduler step failed; retrying in %.1fs", poll)
                self._stop.wait(poll)


    def describe(self) -> list[WorkerOut]:
        """The in-process workers as fleet entries; the heartbeat is the last scheduler step."""
        age = round(time.monotonic() - self._last_step, 3)
        return [WorkerOut(name=f"embedded ({self._workers} threads)", queue="embedded",
                          heartbeat_age_s=age,
                          last_heartbeat=self._last_step_at)]
