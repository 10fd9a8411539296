"""An index for the expiry sweep of pending confirmation requests: (status, expires_at),
so finding the overdue ones reads only them, however many are pending or decided. It
replaces the index on status alone, which it covers (status is its leading column).

Revision ID: 0008
Revises: 0002
"""
from __future__ import annotations

from alembic import op

revision = '0008'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('confirmation_requests', schema=None) as batch_op:
        batch_op.create_index('ix_confirmation_status_expires', ['status', 'expires_at'],
                              unique=False)
        batch_op.drop_index('ix_confirmation_requests_status')


def downgrade() -> None:
    with op.batch_alter_table('confirmation_requests', schema=None) as batch_op:
        batch_op.create_index('ix_confirmation_requests_status', ['status'], unique=False)
        batch_op.drop_index('ix_confirmation_status_expires')
