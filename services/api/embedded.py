"""Embedded mode: the scheduler loop and in-process workers running beside the API."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

from sqlalchemy.orm import Session, sessionmaker

from kernelband.auth_tokens import hash_token, token_prefix
from kernelband.config import Settings
from kernelband.db import repository, session_scope
from kernelband.db.models import ApiToken
from kernelband.scheduling.dispatch import EmbeddedDispatcher
from kernelband.scheduling.pipeline import EngineContext, step
from services.api.schemas import WorkerOut

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


def register_bootstrap_token(factory: sessionmaker[Session], token: str, team: str) -> bool:
    """Store KERNELBAND_BOOTSTRAP_TOKEN for `team` once; True if it was added now."""
    prefix = token_prefix(token)
    if prefix is None:
        raise ValueError(
            "KERNELBAND_BOOTSTRAP_TOKEN is not a KernelBand token (kb_<8 hex>_<secret>); "
            "mint one with `kernelband tokens create --team NAME` or unset it"
        )
    digest = hash_token(token)
    with session_scope(factory) as session:
        if session.query(ApiToken).filter_by(token_hash=digest).first() is not None:
            return False
        owner = repository.get_or_create_team(session, team)
        session.add(ApiToken(team_id=owner.id, name="bootstrap", prefix=prefix, token_hash=digest))
    return True
