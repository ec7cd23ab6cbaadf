"""Paired speedups with their 95% interval on measurements and on each track's best

Revision ID: 0009_paired_speedups
Revises: 0008_job_limits
Create Date: 2026-11-28 17:15:00

A measured speedup is the original's time over the candidate's, interleaved in one runner
session (kernelband.profile.paired.PairedSpeedup): point, low, high, rounds, method and the
baseline it was paired against. Rows from before this revision have none: they show as "not
measured", never as a ratio of two unpaired times. `tracks.best_speedup_final` marks a best whose
speedup the job's final step re-measured against the original.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0009_paired_speedups'
down_revision: str | None = '0008_job_limits'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('measurements', schema=None) as batch_op:
        batch_op.add_column(sa.Column('speedup', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('speedup_low', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('speedup_high', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('speedup_rounds', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('speedup_method', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('speedup_baseline', sa.Text(), nullable=True))
    with op.batch_alter_table('tracks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('best_speedup_low', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('best_speedup_high', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('best_speedup_method', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('best_speedup_final', sa.Boolean(),
                                      server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('tracks', schema=None) as batch_op:
        for name in ('best_speedup_final', 'best_speedup_method', 'best_speedup_high',
                     'best_speedup_low'):
            batch_op.drop_column(name)
    with op.batch_alter_table('measurements', schema=None) as batch_op:
        for name in ('speedup_baseline', 'speedup_method', 'speedup_rounds', 'speedup_high',
                     'speedup_low', 'speedup'):
            batch_op.drop_column(name)
