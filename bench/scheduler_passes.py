"""One timed scheduler pass of the throughput benchmark (bench/scheduler_throughput.py), and
the timings it collects: each cycle as `scheduling.pipeline.step` runs it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from kernelband.scheduling import pipeline
from kernelband.scheduling.lifecycle import finish_tracks_and_jobs
from kernelband.scheduling.pipeline import (
    EngineContext,
    fenced,
    ingest_and_select,
    ingest_batch,
    select_and_dispatch,
)


@dataclass
class Timings:
    """Per-call durations (seconds) of one configuration."""

    select: list[float] = field(default_factory=list)
    ingest: list[float] = field(default_factory=list)
    finish: list[float] = field(default_factory=list)
    pulls: int = 0
    results: int = 0
    wall_s: float = 0.0
    marks: list[tuple[float, int]] = field(default_factory=list)  # (seconds in, pulls so far)
    # (pulls so far, this process's CPU seconds so far, the reference loop's CPU excluded): CPU
    # per pull is what a busy machine changes least (other processes lengthen the wall time)
    cpu_marks: list[tuple[int, float]] = field(default_factory=list)
    # (seconds in, ms of the small reference loop then): the VM's speed moves between windows
    references: list[tuple[float, float]] = field(default_factory=list)
    postgres_cpu_s: float | None = None  # the run's database backends (None: not readable)
    # (seconds in, pulls so far, the run's Postgres backends' CPU seconds so far), read with
    # each reference loop: whether a slower window is the scheduler's or Postgres's work
    postgres_marks: list[tuple[float, int, float]] = field(default_factory=list)


def timed_step(ctx: EngineContext, t: Timings) -> None:
    """One scheduler pass, as `scheduling.pipeline.step` does it, timing each cycle. A pass
    without housekeeping applies its results and selects in one transaction
    (`ingest_and_select`): its select+dispatch cycle runs from the selection's start to the
    sends, the shared commit included, and its ingest cycle is the part before."""
    items = ctx.dispatcher.drain()
    housekeeping = ctx.housekeeping_due()
    if items and not housekeeping:
        _SELECTION_STARTS.clear()
        start = time.perf_counter()
        _, _, selected, dispatched = ingest_and_select(ctx, items)
        end = time.perf_counter()
        begun = _SELECTION_STARTS[-1] if _SELECTION_STARTS else end
        t.ingest.append(begun - start)
        t.select.append(end - begun)
        t.finish.append(0.0)
        t.results += len(items)
        t.pulls += selected
        ctx.stopped_at_bound(selected, dispatched)
        return
    if items:
        start = time.perf_counter()
        ingest_batch(ctx, items)
        t.ingest.append(time.perf_counter() - start)
        t.results += len(items)
    start = time.perf_counter()
    if housekeeping:  # as `step`: not every pass while passes run back to back
        with fenced(ctx) as session:
            finish_tracks_and_jobs(session, ctx.clock())
    t.finish.append(time.perf_counter() - start)
    start = time.perf_counter()
    selected, dispatched = select_and_dispatch(ctx)
    t.select.append(time.perf_counter() - start)
    t.pulls += selected
    ctx.stopped_at_bound(selected, dispatched)


# When each selection of a combined pass began (time.perf_counter): `select_pulls` as the
# pipeline calls it, timed; the pipeline's own code is left as the leader runs it.
_SELECTION_STARTS: list[float] = []


def _timed_select_pulls(*args: Any, **kwargs: Any) -> int:
    _SELECTION_STARTS.append(time.perf_counter())
    selected: int = _select_pulls(*args, **kwargs)
    return selected


_select_pulls = pipeline.select_pulls
pipeline.select_pulls = _timed_select_pulls


__all__ = ["Timings", "timed_step"]
