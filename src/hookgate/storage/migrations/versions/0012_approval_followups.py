"""Approval follow-ups: the agent's reminder / escalation / timeout policy kept with each
request, how many reminders went out (the compare-and-set that makes one instance the
sender), when and to whom it was escalated, the escalation cards, and why nobody can be
reached.

Revision ID: 0012
Revises: 0011
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from hookgate.storage.types import UTCDateTime

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('confirmation_requests', schema=None) as batch_op:
        batch_op.add_column(sa.Column('followup', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('reminders_sent', sa.Integer(), nullable=False,
                                      server_default='0'))
        batch_op.add_column(sa.Column('last_reminded_at', UTCDateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('escalated_at', UTCDateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('escalated_to', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('escalation_refs', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('unreachable', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('confirmation_requests', schema=None) as batch_op:
        for name in ('unreachable', 'escalation_refs', 'escalated_to', 'escalated_at',
                     'last_reminded_at', 'reminders_sent', 'followup'):
            batch_op.drop_column(name)
