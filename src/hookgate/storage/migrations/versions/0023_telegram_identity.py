"""users.telegram_user_id: a person's Telegram user id, to match a click on a Telegram
approval message to a hookgate user.

Revision ID: 0023
Revises: 0022
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0023'
down_revision = '0022'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('telegram_user_id', sa.String(length=128), nullable=True))
        batch_op.create_index(batch_op.f('ix_users_telegram_user_id'), ['telegram_user_id'],
                              unique=False)


def downgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_users_telegram_user_id'))
        batch_op.drop_column('telegram_user_id')
