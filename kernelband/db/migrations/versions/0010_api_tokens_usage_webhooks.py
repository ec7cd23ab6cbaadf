"""Token scopes and expiry, per-team quotas, a job's submitted problem name, team webhooks

Revision ID: 0010_api_tokens_usage_webhooks
Revises: 0009_paired_speedups
Create Date: 2026-11-28 17:30:00

Tokens made before scopes existed become `admin` (the full power they had). Quotas are NULL
(no limit) until the operator sets them. `jobs.problem_name` is NULL for older jobs (their
problem row's name is shown). Webhooks and their delivery log are new tables.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0010_api_tokens_usage_webhooks'
down_revision: str | None = '0009_paired_speedups'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.add_column(sa.Column('scope', sa.String(length=16), server_default='admin',
                                      nullable=False))
        batch_op.add_column(sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table('teams', schema=None) as batch_op:
        batch_op.add_column(sa.Column('quota_concurrent_jobs', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('quota_gpu_s_per_day', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('quota_usd_per_day', sa.Float(), nullable=True))
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('problem_name', sa.String(length=200), nullable=True))
    op.create_table(
        'webhooks',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('team_id', sa.Integer(), nullable=False),
        sa.Column('url', sa.Text(), nullable=False),
        sa.Column('secret', sa.String(length=80), nullable=False),
        sa.Column('events', sa.JSON(), nullable=False),
        sa.Column('cursor_event_id', sa.Integer(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_webhooks_team_id_teams'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_webhooks')),
    )
    with op.batch_alter_table('webhooks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_webhooks_team_id'), ['team_id'], unique=False)
    op.create_table(
        'webhook_deliveries',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('webhook_id', sa.Integer(), nullable=False),
        sa.Column('event_id', sa.Integer(), nullable=False),
        sa.Column('kind', sa.String(length=40), nullable=False),
        sa.Column('payload', sa.JSON(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('tries', sa.Integer(), nullable=False),
        sa.Column('last_status', sa.Integer(), nullable=True),
        sa.Column('last_error', sa.Text(), nullable=True),
        sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('delivered_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['webhook_id'], ['webhooks.id'],
                                name=op.f('fk_webhook_deliveries_webhook_id_webhooks'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_deliveries')),
        sa.UniqueConstraint('webhook_id', 'event_id', 'kind', name='uq_webhook_deliveries_event'),
    )
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.create_index('ix_webhook_deliveries_state_next', ['state', 'next_attempt_at'],
                              unique=False)


def downgrade() -> None:
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.drop_index('ix_webhook_deliveries_state_next')
    op.drop_table('webhook_deliveries')
    with op.batch_alter_table('webhooks', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhooks_team_id'))
    op.drop_table('webhooks')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('problem_name')
    with op.batch_alter_table('teams', schema=None) as batch_op:
        batch_op.drop_column('quota_usd_per_day')
        batch_op.drop_column('quota_gpu_s_per_day')
        batch_op.drop_column('quota_concurrent_jobs')
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_column('expires_at')
        batch_op.drop_column('scope')
