"""runs.followed: whether a stream in another process follows the run (or another executor
took it over), so its writes must NOTIFY. A run taken by the instance that started it and
followed only there notifies nobody: every listening backend pays a transaction per NOTIFY.
Existing runs count as followed.

Revision ID: 0019
Revises: 0018
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('followed', sa.Boolean(), nullable=False,
                                      server_default=sa.true()))
    # New rows start unfollowed (the insert names no value): set the default after the
    # rows already there took ``true``.
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.alter_column('followed', server_default=sa.false())


def downgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_column('followed')
