"""frontier_entries: a track's bandit frontier as rows, out of the policy-state JSON

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 22:00:00

The upgrade moves every stored frontier out of tracks.policy_state into rows; the downgrade
puts it back. Both go through plain table objects, not the service's models, so that later
model changes cannot alter what this revision does.
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

tracks = sa.table(
    'tracks',
    sa.column('id', sa.Integer()),
    sa.column('policy_state', sa.JSON()),
    sa.column('frontier_size', sa.Integer()),
)
rows = sa.table(
    'frontier_entries',
    sa.column('track_id', sa.Integer()),
    sa.column('position', sa.Integer()),
    sa.column('entry', sa.JSON()),
)


def upgrade() -> None:
    op.create_table('frontier_entries',
    sa.Column('track_id', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('entry', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['track_id'], ['tracks.id'],
                            name=op.f('fk_frontier_entries_track_id_tracks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('track_id', 'position', name=op.f('pk_frontier_entries'))
    )
    with op.batch_alter_table('tracks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('frontier_size', sa.Integer(), server_default='0',
                                      nullable=False))
    bind = op.get_bind()
    stored = bind.execute(sa.select(tracks.c.id, tracks.c.policy_state)
                          .where(tracks.c.policy_state.is_not(None))).all()
    for track_id, state in stored:
        frontier: list[dict[str, Any]] = list(state.pop('frontier', None) or [])
        if frontier:
            bind.execute(sa.insert(rows), [
                {'track_id': track_id, 'position': i, 'entry': e} for i, e in enumerate(frontier)])
        bind.execute(sa.update(tracks).where(tracks.c.id == track_id)
                     .values(policy_state=state, frontier_size=len(frontier)))


def downgrade() -> None:
    bind = op.get_bind()
    stored = bind.execute(sa.select(tracks.c.id, tracks.c.policy_state, tracks.c.frontier_size)
                          .where(tracks.c.policy_state.is_not(None))).all()
    for track_id, state, size in stored:
        entries = bind.execute(sa.select(rows.c.entry).where(rows.c.track_id == track_id)
                               .order_by(rows.c.position).limit(size)).scalars().all()
        bind.execute(sa.update(tracks).where(tracks.c.id == track_id)
                     .values(policy_state={**state, 'frontier': list(entries)}))
    with op.batch_alter_table('tracks', schema=None) as batch_op:
        batch_op.drop_column('frontier_size')
    op.drop_table('frontier_entries')
