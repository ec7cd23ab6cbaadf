"""Track rows kept small and rewritten in place

Revision ID: 0014_tracks_hot_updates
Revises: 0013_source_track_index
Create Date: 2026-11-30 20:10:00

The leader rewrites each running track's row again and again (its counters and policy state
written back, its best candidate), and every scheduler pass reads the running tracks. Where
nothing vacuums, a rewrite that does not fit on its row's page leaves the old version behind
and puts the new one on another page, with a new entry in each index: in a 60 s benchmark run
of 100 tracks the table grew from 27 to about 190 pages, and each read of the running tracks
visited all of them. Postgres (only) is asked to

- move the policy state (about 1.4 kB of JSON, read only when a leader loads a track it does
  not hold) out of the row once a row passes 128 bytes (`toast_tuple_target`), so a track row
  is a couple of hundred bytes, and
- fill new pages to half (`fillfactor`), leaving room on a row's own page for its next
  version: such an update adds no index entry (a heap-only tuple), and the next read of a full
  page prunes the versions no transaction can see any more, vacuum or not.

Rows already stored keep their layout until they are next written (or a VACUUM FULL).
"""

from collections.abc import Sequence

from alembic import op

revision: str = '0014_tracks_hot_updates'
down_revision: str | None = '0013_source_track_index'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':  # storage parameters: SQLite has none
        op.execute('ALTER TABLE tracks SET (fillfactor = 50, toast_tuple_target = 128)')


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('ALTER TABLE tracks RESET (fillfactor, toast_tuple_target)')
