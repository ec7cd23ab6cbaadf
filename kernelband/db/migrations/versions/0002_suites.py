"""suites table

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 00:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('suites',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('team_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('format', sa.String(length=16), nullable=False),
    sa.Column('settings', sa.JSON(), nullable=False),
    sa.Column('load_failures', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_suites_team_id_teams'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_suites'))
    )
    with op.batch_alter_table('suites', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_suites_team_id'), ['team_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('suites', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_suites_team_id'))
    op.drop_table('suites')
