"""connector_call_logs: acting_service, the service identity that asked a call acting for a
person (the row's user_id, the call's initiator). Rows that hold it are hashed as version 6
(which covers every field); rows already written keep their version and verify as before.

Revision ID: 0022
Revises: 0021
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0022'
down_revision = '0021'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('connector_call_logs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('acting_service', sa.String(length=128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('connector_call_logs', schema=None) as batch_op:
        batch_op.drop_column('acting_service')
