"""Garbage collection for a process that runs scheduler passes: no collection inside a pass.

The scheduler keeps long-lived objects (parsed policy states with their frontiers, ORM metadata,
view caches), and a pass allocates many more that live until it ends (ORM rows, state copies).
Python's automatic collections, triggered by whatever allocation crosses a threshold, landed
inside passes: a full one took hundreds of ms at 100 tracks x 1,000 candidates, and the young
ones (every 2,000 allocations, walking every live list of 1,000s of frontier entries) about 6%
of a pass. `PassCollector` turns automatic collection off while passes run and collects between
passes instead: the young generations at most every `YOUNG_EVERY_S` (objects that died before
are never walked; those alive then are walked once, so a state replaced by the next pass is
not walked at all), and a full collection at most every
`COLLECT_EVERY_S`, after which every surviving object is frozen (`gc.freeze`), so the next full
collection walks only what survived since. Every `THAW_EVERY_S` the frozen objects are thawed
and collected too, so cycles that died after being frozen are reclaimed; that one longer
collection also runs between passes. Collection is process-wide: cyclic garbage of other
threads waits for the next young collection too.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

YOUNG_THRESHOLD = 2_000  # young collections, should something turn automatic collection on
MIDDLE_THRESHOLD = 10  # young collections per middle-generation collection
NO_AUTOMATIC_FULL = 1_000_000_000  # middle collections per full one: in practice never
# Young collections after every pass took about 4 ms each at 100 tracks x 1,000 candidates
# (5% of the scheduler's CPU); at most once a second they cost a quarter of that per pull.
YOUNG_EVERY_S = 1.0
COLLECT_EVERY_S = 30.0  # full collection of the objects that survived since the last one
THAW_EVERY_S = 1800.0  # full collection of every object, frozen ones included


class PassCollector:
    """Runs collections between scheduler passes only; call `between_passes` after each pass."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.last_collect: float | None = None  # None: collect after the next pass
        self.last_young = clock()  # the young generations' last collection
        self.last_thaw = clock()
        self.full_collections = 0

    def start(self) -> None:
        """Turn automatic collection off (process-wide); the thresholds are set for anything
        that turns it on again meanwhile."""
        gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, NO_AUTOMATIC_FULL)
        gc.disable()

    def rebuilt(self) -> None:
        """Long-lived state was rebuilt (warm-up, a takeover): collect and freeze after the
        next pass, which is the first to hold it all."""
        self.last_collect = None

    def between_passes(self) -> None:
        """The young generations when `YOUNG_EVERY_S` has passed; a full collection instead
        when one is due, then freeze the survivors."""
        now = self.clock()
        if self.last_collect is not None and now - self.last_collect < COLLECT_EVERY_S:
            if now - self.last_young >= YOUNG_EVERY_S:
                gc.collect(1)
                self.last_young = now
            return
        if now - self.last_thaw >= THAW_EVERY_S:
            gc.unfreeze()
            self.last_thaw = now
        gc.collect()
        gc.freeze()
        self.full_collections += 1
        self.last_collect = self.last_young = self.clock()

    def stop(self) -> None:
        """Back to Python's automatic default schedule, every object collectable again."""
        gc.unfreeze()
        gc.set_threshold(700, 10, 10)
        gc.enable()


__all__ = ["COLLECT_EVERY_S", "THAW_EVERY_S", "YOUNG_EVERY_S", "PassCollector"]
