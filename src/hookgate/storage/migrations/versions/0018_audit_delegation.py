"""connector_call_logs: parent_session and depth, where a sub-agent's call sits in its
delegation tree. Rows that hold them are hashed as version 4 (which covers both and the
decision); rows already written keep their version and verify as before.

Revision ID: 0018
Revises: 0017
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('connector_call_logs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('parent_session', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('depth', sa.SmallInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('connector_call_logs', schema=None) as batch_op:
        batch_op.drop_column('depth')
        batch_op.drop_column('parent_session')
