"""Attempts indexed by when they finished

Revision ID: 0012_attempts_finished_at_index
Revises: 0011_public_id_keys
Create Date: 2026-11-29 05:00:00

The fleet view's throughput reads the attempts that finished in a recent window on every
poll that is not a 304; without an index that read scanned the whole table (86 ms at 200,000
attempts, 186 ms at a million, against 15 and 38 ms with it).
"""

from collections.abc import Sequence

from alembic import op

revision: str = '0012_attempts_finished_at_index'
down_revision: str | None = '0011_public_id_keys'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index('ix_attempts_finished_at', 'attempts', ['finished_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_attempts_finished_at', table_name='attempts')
