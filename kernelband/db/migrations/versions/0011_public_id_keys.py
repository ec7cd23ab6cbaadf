"""The key behind public ids, kept once per database

Revision ID: 0011_public_id_keys
Revises: 0010_api_tokens_usage_webhooks
Create Date: 2026-11-29 10:00:00

Public ids (kernelband/public_ids.py) are the integer ids through a keyed permutation. Without
`KERNELBAND_ID_KEY`, the first process that needs the key writes a random one here (one row,
id 1), so every API process and the webhook deliverer use the same one across restarts.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0011_public_id_keys'
down_revision: str | None = '0010_api_tokens_usage_webhooks'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'public_id_keys',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('key', sa.String(length=128), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_public_id_keys')),
    )


def downgrade() -> None:
    op.drop_table('public_id_keys')
