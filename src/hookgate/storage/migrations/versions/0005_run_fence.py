"""Runs get a fencing counter: every executor that takes a run over raises it, and writes
(checkpoints, events, tool claims) are accepted only from the holder of the current value.

Revision ID: 0005
Revises: 0004
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('runs') as batch:
        batch.add_column(sa.Column('fence', sa.BigInteger(), nullable=False,
                                   server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('runs') as batch:
        batch.drop_column('fence')
