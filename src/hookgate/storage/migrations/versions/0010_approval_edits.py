"""Approve with edits and a message to the model: the arguments an approver changed (and
their digest, which is what may run) and the words the model reads with the decision.

Revision ID: 0010
Revises: 0011
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('confirmation_requests', schema=None) as batch_op:
        batch_op.add_column(sa.Column('edited_args', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('edited_args_sha256', sa.String(length=64),
                                      nullable=True))
        batch_op.add_column(sa.Column('message', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('confirmation_requests', schema=None) as batch_op:
        batch_op.drop_column('message')
        batch_op.drop_column('edited_args_sha256')
        batch_op.drop_column('edited_args')
