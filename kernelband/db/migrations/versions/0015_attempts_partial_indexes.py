"""Attempts' state and finished indexes hold only the rows their reads ask for (Postgres)

Revision ID: 0015_attempts_partial_indexes
Revises: 0014_tracks_hot_updates
Create Date: 2026-11-30 22:50:00

Every attempt is inserted, then updated once when it finishes. That update changes indexed
columns (its state, its finished time), so it cannot stay on its page as a heap-only tuple:
the new version gets an entry in every index of the table, and the insert did too. With five
indexes, 30 index entries were written per pull (of 50 in all, WAL of a 60 s benchmark run at
100 jobs x 1,000 candidates). The (state, lease) index is only ever read for attempts still
pending, dispatched or expired (claims, lease expiry, pulls in flight), and the finished index
only for attempts finished after a time (the fleet view, usage): on Postgres each now leaves
out the other rows, so a finished attempt's version is not in the first and an unfinished one
not in the second. SQLite keeps both whole (its planner uses a partial index only where the
query repeats its condition).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0015_attempts_partial_indexes'
down_revision: str | None = '0014_tracks_hot_updates'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ACTIVE = "state IN ('pending', 'dispatched', 'expired')"


def upgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return
    op.drop_index('ix_attempts_state_lease', table_name='attempts')
    op.create_index('ix_attempts_state_lease', 'attempts', ['state', 'lease_expires_at'],
                    unique=False, postgresql_where=sa.text(ACTIVE))
    op.drop_index('ix_attempts_finished_at', table_name='attempts')
    op.create_index('ix_attempts_finished_at', 'attempts', ['finished_at'], unique=False,
                    postgresql_where=sa.text('finished_at IS NOT NULL'))


def downgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return
    op.drop_index('ix_attempts_state_lease', table_name='attempts')
    op.create_index('ix_attempts_state_lease', 'attempts', ['state', 'lease_expires_at'],
                    unique=False)
    op.drop_index('ix_attempts_finished_at', table_name='attempts')
    op.create_index('ix_attempts_finished_at', 'attempts', ['finished_at'], unique=False)
