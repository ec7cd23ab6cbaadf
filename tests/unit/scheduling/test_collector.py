"""Garbage collection between scheduler passes: no automatic full collection, frozen survivors."""

from __future__ import annotations

import gc

from kernelband.scheduling.collector import (
    COLLECT_EVERY_S,
    THAW_EVERY_S,
    YOUNG_EVERY_S,
    PassCollector,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_full_collections_run_between_passes_and_freeze_survivors() -> None:
    clock = FakeClock()
    collector = PassCollector(clock)
    collector.start()
    try:
        assert gc.get_threshold()[2] >= 10**9  # never automatically
        assert not gc.isenabled()  # nothing collects inside a pass
        collector.between_passes()  # the first pass after start: collect and freeze
        assert collector.full_collections == 1 and gc.get_freeze_count() > 0
        clock.now += COLLECT_EVERY_S / 2
        collector.between_passes()
        assert collector.full_collections == 1  # not due yet
        clock.now += COLLECT_EVERY_S
        collector.between_passes()
        assert collector.full_collections == 2
        collector.rebuilt()  # a takeover rebuilt the long-lived state: collect after next pass
        collector.between_passes()
        assert collector.full_collections == 3
        clock.now += THAW_EVERY_S
        collector.between_passes()  # thawed, collected, frozen again
        assert collector.full_collections == 4
    finally:
        collector.stop()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == (700, 10, 10)
    assert gc.isenabled()


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_cycles_of_passes_are_collected_at_the_first_pass_end_a_second_later() -> None:
    clock = FakeClock()
    collector = PassCollector(clock)
    collector.start()
    try:
        collector.between_passes()  # the first full collection
        gc.collect()
        made = [Cycle() for _ in range(5_000)]  # well past the automatic young threshold
        del made
        clock.now += YOUNG_EVERY_S / 2
        collector.between_passes()  # too soon: passes back to back share one collection
        assert sum(isinstance(o, Cycle) for o in gc.get_objects()) == 5_000  # still there
        clock.now += YOUNG_EVERY_S / 2
        collector.between_passes()  # not a full one: the young generations
        assert collector.full_collections == 1
        assert not any(isinstance(o, Cycle) for o in gc.get_objects())
    finally:
        collector.stop()
