"""jobs.limits: the sandbox limits a job sets for its own runs (run, compile, per-config compile)

Revision ID: 0008_job_limits
Revises: 0007_measurement_method_text
Create Date: 2026-11-26 17:00:00

An empty object means the node's settings (KERNELBAND_SANDBOX_*); keys are run_s, compile_s and
config_compile_s (kernelband/sandbox/limits.py, JOB_LIMITS).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0008_job_limits'
down_revision: str | None = '0007_measurement_method_text'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('limits', sa.JSON(), server_default='{}', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('limits')
