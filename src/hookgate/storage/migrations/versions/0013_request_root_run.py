"""The root run of a delegated child's request: a child parks with its root run, and the
decision (or the expiry) continues the root, which resumes the child inside it.

Revision ID: 0013
Revises: 0010
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('confirmation_requests', schema=None) as batch_op:
        batch_op.add_column(sa.Column('root_run_id', sa.String(length=64), nullable=True))
        batch_op.create_index('ix_confirmation_root_run', ['root_run_id'])


def downgrade() -> None:
    with op.batch_alter_table('confirmation_requests', schema=None) as batch_op:
        batch_op.drop_index('ix_confirmation_root_run')
        batch_op.drop_column('root_run_id')
