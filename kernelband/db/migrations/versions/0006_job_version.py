"""jobs.version: a counter the scheduler bumps whenever a job's visible state changes

Revision ID: 0006_job_version
Revises: 0004
Create Date: 2026-11-25 07:40:00

Polling clients send it back as an ETag (If-None-Match) and get 304 while it is unchanged.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0006_job_version'
down_revision: str | None = '0005_generation_loop'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('version', sa.Integer(), server_default='1',
                                      nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('version')
