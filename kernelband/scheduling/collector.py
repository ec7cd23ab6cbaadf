"""Garbage collection for a process that runs scheduler passes: no full collection inside a pass.

The scheduler keeps long-lived objects (parsed policy states with their frontiers, ORM metadata,
view caches); Python's automatic full collection walks all of them and, triggered by whatever
allocation crosses its threshold, lands inside a pass (hundreds of ms at 100 tracks x 1,000
candidates). `PassCollector` takes full collections out of the automatic schedule and runs them
between passes instead: after each one, every surviving object is frozen (`gc.freeze`), so the
next full collection walks only what survived since. The young generations are still collected
automatically, their first threshold a little above the default. Every
`THAW_EVERY_S` the frozen objects are thawed and collected too, so cycles that died after being
frozen are reclaimed; that one longer collection also runs between passes.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

YOUNG_THRESHOLD = 2_000  # allocations minus deallocations between young collections (~2 ms each)
MIDDLE_THRESHOLD = 10  # young collections per middle-generation collection
NO_AUTOMATIC_FULL = 1_000_000_000  # middle collections per full one: in practice never
COLLECT_EVERY_S = 30.0  # full collection of the objects that survived since the last one
THAW_EVERY_S = 1800.0  # full collection of every object, frozen ones included


class PassCollector:
    """Runs full collections between scheduler passes; call `between_passes` after each pass."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.last_collect: float | None = None  # None: collect after the next pass
        self.last_thaw = clock()
        self.full_collections = 0

    def start(self) -> None:
        """Take full collections off the automatic schedule (process-wide)."""
        gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, NO_AUTOMATIC_FULL)

    def rebuilt(self) -> None:
        """Long-lived state was rebuilt (warm-up, a takeover): collect and freeze after the
        next pass, which is the first to hold it all."""
        self.last_collect = None

    def between_passes(self) -> None:
        """A full collection when one is due, then freeze the survivors."""
        now = self.clock()
        if self.last_collect is not None and now - self.last_collect < COLLECT_EVERY_S:
            return
        if now - self.last_thaw >= THAW_EVERY_S:
            gc.unfreeze()
            self.last_thaw = now
        gc.collect()
        gc.freeze()
        self.full_collections += 1
        self.last_collect = self.clock()

    def stop(self) -> None:
        """Back to Python's default schedule, every object collectable again."""
        gc.unfreeze()
        gc.set_threshold(700, 10, 10)


__all__ = ["COLLECT_EVERY_S", "THAW_EVERY_S", "PassCollector"]
