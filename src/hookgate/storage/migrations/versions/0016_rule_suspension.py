"""approval_rules: suspended_at and suspended_reason. Revoking a user's token suspends the
standing rules they created until an admin enables them again.

Revision ID: 0016
Revises: 0015
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import hookgate.storage.types

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('approval_rules', schema=None) as batch_op:
        batch_op.add_column(sa.Column('suspended_at', hookgate.storage.types.UTCDateTime(timezone=True),
                                      nullable=True))
        batch_op.add_column(sa.Column('suspended_reason', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('approval_rules', schema=None) as batch_op:
        batch_op.drop_column('suspended_reason')
        batch_op.drop_column('suspended_at')
