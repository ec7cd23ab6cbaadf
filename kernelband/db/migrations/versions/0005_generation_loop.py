"""generation loop: repair turns, duplicates, transcripts and the team skill library

Revision ID: 0005_generation_loop
Revises: 0004
Create Date: 2026-11-25 08:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005_generation_loop'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('teams', schema=None) as batch_op:
        batch_op.add_column(sa.Column('skill_library', sa.Boolean(), server_default=sa.true(),
                                      nullable=False))
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('repair_turns', sa.Integer(), server_default='1',
                                      nullable=False))
        batch_op.add_column(sa.Column('dedupe', sa.Boolean(), server_default=sa.true(),
                                      nullable=False))
    with op.batch_alter_table('candidates', schema=None) as batch_op:
        batch_op.add_column(sa.Column('source_hash', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('duplicate_of', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('repair_of', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('turn', sa.Integer(), server_default='0', nullable=False))
        batch_op.create_index(batch_op.f('ix_candidates_source_hash'), ['source_hash'],
                              unique=False)
        batch_op.create_foreign_key(batch_op.f('fk_candidates_duplicate_of_candidates'),
                                    'candidates', ['duplicate_of'], ['id'], ondelete='SET NULL')
        batch_op.create_foreign_key(batch_op.f('fk_candidates_repair_of_candidates'),
                                    'candidates', ['repair_of'], ['id'], ondelete='SET NULL')
    op.create_table('transcripts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('track_id', sa.Integer(), nullable=False),
    sa.Column('attempt_id', sa.Integer(), nullable=True),
    sa.Column('decision_id', sa.String(length=40), nullable=True),
    sa.Column('parent_id', sa.Integer(), nullable=True),
    sa.Column('candidate_id', sa.Integer(), nullable=True),
    sa.Column('turn', sa.Integer(), nullable=False),
    sa.Column('strategy', sa.String(length=40), nullable=True),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('messages', sa.JSON(), nullable=False),
    sa.Column('reply', sa.Text(), nullable=False),
    sa.Column('outcome', sa.Text(), nullable=True),
    sa.Column('prompt_tokens', sa.Integer(), nullable=False),
    sa.Column('completion_tokens', sa.Integer(), nullable=False),
    sa.Column('cost_usd', sa.Float(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['attempt_id'], ['attempts.id'],
                            name=op.f('fk_transcripts_attempt_id_attempts'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_transcripts_job_id_jobs'),
                            ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['track_id'], ['tracks.id'],
                            name=op.f('fk_transcripts_track_id_tracks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_transcripts'))
    )
    with op.batch_alter_table('transcripts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_transcripts_job_id'), ['job_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_transcripts_candidate_id'), ['candidate_id'],
                              unique=False)
    op.create_table('skills',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('team_id', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=True),
    sa.Column('candidate_id', sa.Integer(), nullable=True),
    sa.Column('problem_name', sa.String(length=200), nullable=False),
    sa.Column('strategy', sa.String(length=40), nullable=False),
    sa.Column('target', sa.String(length=16), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('before', sa.Text(), nullable=False),
    sa.Column('after', sa.Text(), nullable=False),
    sa.Column('speedup', sa.Float(), nullable=False),
    sa.Column('label', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_skills_job_id_jobs'),
                            ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_skills_team_id_teams'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_skills'))
    )
    with op.batch_alter_table('skills', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_skills_team_id'), ['team_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('skills', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_skills_team_id'))
    op.drop_table('skills')
    with op.batch_alter_table('transcripts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_transcripts_candidate_id'))
        batch_op.drop_index(batch_op.f('ix_transcripts_job_id'))
    op.drop_table('transcripts')
    with op.batch_alter_table('candidates', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_candidates_repair_of_candidates'),
                                 type_='foreignkey')
        batch_op.drop_constraint(batch_op.f('fk_candidates_duplicate_of_candidates'),
                                 type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_candidates_source_hash'))
        batch_op.drop_column('turn')
        batch_op.drop_column('repair_of')
        batch_op.drop_column('duplicate_of')
        batch_op.drop_column('source_hash')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('dedupe')
        batch_op.drop_column('repair_turns')
    with op.batch_alter_table('teams', schema=None) as batch_op:
        batch_op.drop_column('skill_library')
