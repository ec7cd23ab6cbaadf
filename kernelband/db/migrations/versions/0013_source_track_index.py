"""Candidates indexed by source and track together

Revision ID: 0013_source_track_index
Revises: 0012_attempts_finished_at_index
Create Date: 2026-11-30 17:00:00

A batch's duplicate lookup asks, for each child, for the candidates of its track with its
normalised source. Indexed by source alone, each probe read every candidate with that source,
in every track (jobs of one problem share sources: the original, and what a deterministic
generator writes from it) and dropped the other tracks' rows; by source and track it reads the
track's own. The source-only index goes: the pair's index serves a lookup by source alone too.
"""

from collections.abc import Sequence

from alembic import op

revision: str = '0013_source_track_index'
down_revision: str | None = '0012_attempts_finished_at_index'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index('ix_candidates_source_hash_track', 'candidates', ['source_hash', 'track_id'],
                    unique=False)
    op.drop_index('ix_candidates_source_hash', table_name='candidates')


def downgrade() -> None:
    op.create_index('ix_candidates_source_hash', 'candidates', ['source_hash'], unique=False)
    op.drop_index('ix_candidates_source_hash_track', table_name='candidates')
