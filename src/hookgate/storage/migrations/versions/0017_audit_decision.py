"""connector_call_logs: approver, request_id and wait_us, the decision on a call. Rows that
hold one are hashed as version 3 (which covers the three); rows already written keep their
version and verify as before.

Revision ID: 0017
Revises: 0016
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('connector_call_logs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('approver', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('request_id', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('wait_us', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('connector_call_logs', schema=None) as batch_op:
        batch_op.drop_column('wait_us')
        batch_op.drop_column('request_id')
        batch_op.drop_column('approver')
