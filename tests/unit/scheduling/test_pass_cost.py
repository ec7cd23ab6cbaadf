"""A pass's reads stay flat over a long run of one job (real Postgres, where nothing vacuums)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from scheduling_fakes import FAKE_TASKS, Clock, make_job
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.session import make_engine, make_session_factory
from kernelband.scheduling.dispatch import InlineDispatcher
from kernelband.scheduling.pipeline import EngineContext, step

# Buffers read per table (heap, indexes and TOAST), hits and reads alike: what a pass reads,
# whatever the machine's speed or what its cache holds.
_BLOCKS = text("SELECT relname, heap_blks_hit + heap_blks_read + coalesce(idx_blks_hit, 0) "
               "+ coalesce(idx_blks_read, 0) + coalesce(toast_blks_hit, 0) "
               "+ coalesce(toast_blks_read, 0) + coalesce(tidx_blks_hit, 0) "
               "+ coalesce(tidx_blks_read, 0) FROM pg_statio_user_tables")


@pytest.fixture
def one_connection(postgres_factory: sessionmaker[Session], postgres_url: str
                   ) -> Iterator[Engine]:
    """An engine of one pooled connection on the emptied tables: every pass runs in one server
    process, which can be made to publish its counters and then read them back."""
    engine = make_engine(postgres_url, pool_size=1, max_overflow=0)
    yield engine
    engine.dispose()


def blocks_read(engine: Engine) -> dict[str, int]:
    """Buffers read per table so far, this connection's own reads published first (a server
    process otherwise publishes them at most once a second)."""
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_stat_force_next_flush()"))
        conn.commit()  # published as the process goes idle after this transaction
        conn.execute(text("SELECT pg_stat_clear_snapshot()"))
        return {name: int(count) for name, count in conn.execute(_BLOCKS)}


def run(ctx: EngineContext, clock: Clock, passes: int) -> None:
    for _ in range(passes):
        step(ctx)
        clock.advance(1.0)


def reads_per_pass(engine: Engine, ctx: EngineContext, clock: Clock, passes: int
                   ) -> dict[str, float]:
    before = blocks_read(engine)
    run(ctx, clock, passes)
    after = blocks_read(engine)
    return {name: (count - before.get(name, 0)) / passes for name, count in after.items()}


def test_a_pass_around_pull_500_reads_about_what_one_around_pull_50_read(
        one_connection: Engine) -> None:
    # Every pass writes the track's state back (no hot-state interval): its row is rewritten
    # most often here, and nothing vacuums the test database either. A pass is a second
    # apart, so by the late passes the leases (300 s) of the first few hundred attempts,
    # finished long since, have passed.
    factory = make_session_factory(one_connection)
    make_job(factory, budget_iterations=1000, parallelism=4)
    clock = Clock()
    # housekeeping every pass: by the real clock it comes every pass or every few as passes are
    # slow or fast, and its reads would count the machine's speed, not the history
    ctx = EngineContext(factory, InlineDispatcher(FAKE_TASKS), Settings(housekeeping_interval_s=0.0),
                        clock=clock)
    run(ctx, clock, 50)
    early = reads_per_pass(one_connection, ctx, clock, 20)
    run(ctx, clock, 410)
    late = reads_per_pass(one_connection, ctx, clock, 20)
    # Measured without each fix: track rows rewritten elsewhere on their table and batched
    # updates joined on a whole-table scan, the late passes read 5 times the track buffers
    # (every dead version of the one track row) and 2.2 times the buffers in all; a lease
    # expiry looking from the start, 1.85 times the attempt buffers (every finished attempt
    # whose lease had passed). What is left grows with the depth of indexes that take a row a
    # pull, and with the attempts in the claim's window (1,024 ids), full by about pass 250.
    # Alone: tracks 1.36 times, attempts 1.51, all 1.35-1.37 (also beside two spinning cores).
    # Inside a whole loaded test run the tracks once read 1.50 times (36.2 -> 54.4 buffers), a
    # cause not pinned down: the bounds sit between what the code reads and what it read unfixed.
    assert late["tracks"] <= 2.0 * early["tracks"], (early["tracks"], late["tracks"])
    assert late["attempts"] <= 1.7 * early["attempts"], (early["attempts"], late["attempts"])
    assert sum(late.values()) <= 1.7 * sum(early.values()), (early, late)
