"""A pass's reads stay flat over a long run of one job (real Postgres, where nothing vacuums)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from scheduling_fakes import FAKE_TASKS, make_job
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


def reads_per_pass(engine: Engine, ctx: EngineContext, passes: int) -> dict[str, float]:
    before = blocks_read(engine)
    for _ in range(passes):
        step(ctx)
    after = blocks_read(engine)
    return {name: (count - before.get(name, 0)) / passes for name, count in after.items()}


def test_a_pass_around_pull_500_reads_about_what_one_around_pull_50_read(
        one_connection: Engine) -> None:
    # Every pass writes the track's state back (no hot-state interval): its row is rewritten
    # most often here, and nothing vacuums the test database either.
    factory = make_session_factory(one_connection)
    make_job(factory, budget_iterations=1000, parallelism=4)
    ctx = EngineContext(factory, InlineDispatcher(FAKE_TASKS), Settings())
    for _ in range(50):
        step(ctx)
    early = reads_per_pass(one_connection, ctx, 20)
    for _ in range(410):
        step(ctx)
    late = reads_per_pass(one_connection, ctx, 20)
    # Before track rows were rewritten in place and batched updates read by primary key, the
    # late passes read 5 times the track buffers (every dead version of the one track row)
    # and 2.2 times the buffers in all; what is left grows with the depth of indexes that take
    # a row a pull, and with the attempts in the claim's window (1,024 ids).
    assert late["tracks"] <= 1.5 * early["tracks"], (early["tracks"], late["tracks"])
    assert sum(late.values()) <= 1.5 * sum(early.values()), (early, late)
