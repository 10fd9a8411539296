"""connector_call_logs: session_id, the session (or conversation) a call belongs to as the
agent named it, so the audit log can show and filter it. Rows that hold it are hashed as
version 5 (which covers every field); rows already written keep their version.

Revision ID: 0021
Revises: 0020
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0021'
down_revision = '0020'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('connector_call_logs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('session_id', sa.Text(), nullable=True))
        batch_op.create_index('ix_call_log_org_session', ['org_id', 'session_id'],
                              unique=False)


def downgrade() -> None:
    with op.batch_alter_table('connector_call_logs', schema=None) as batch_op:
        batch_op.drop_index('ix_call_log_org_session')
        batch_op.drop_column('session_id')
