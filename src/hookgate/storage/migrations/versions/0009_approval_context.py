"""Approval context and decision channel: what the approver read besides the arguments
(the user's message, the tool's description, why a person was asked) and through what the
decision came (inbox, api, cli, feishu, slack, wecom).

Revision ID: 0009
Revises: 0005
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('confirmation_requests', schema=None) as batch_op:
        batch_op.add_column(sa.Column('context', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('decided_via', sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('confirmation_requests', schema=None) as batch_op:
        batch_op.drop_column('decided_via')
        batch_op.drop_column('context')
