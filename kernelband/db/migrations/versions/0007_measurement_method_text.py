"""measurements.method: text, not 80 characters

Revision ID: 0007_measurement_method_text
Revises: 0006_job_version
Create Date: 2026-11-25 10:40:00

A GPU measurement's method names the timing protocol, what was verified and the pairing
(e.g. KernelBench's harness with 100 synchronized trials, paired A/B with the parent); those
lines are longer than 80 characters and Postgres refused to store them.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0007_measurement_method_text'
down_revision: str | None = '0006_job_version'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('measurements', schema=None) as batch_op:
        batch_op.alter_column('method', existing_type=sa.String(length=80), type_=sa.Text(),
                              existing_nullable=False)


def downgrade() -> None:
    with op.batch_alter_table('measurements', schema=None) as batch_op:
        batch_op.alter_column('method', existing_type=sa.Text(), type_=sa.String(length=80),
                              existing_nullable=False)
