"""users.discord_user_id: a person's Discord user id, to match a click on a
Discord approval message to a hookgate user.

Revision ID: 0025
Revises: 0024
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0025'
down_revision = '0024'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('discord_user_id', sa.String(length=128),
                                      nullable=True))
        batch_op.create_index(batch_op.f('ix_users_discord_user_id'),
                              ['discord_user_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_users_discord_user_id'))
        batch_op.drop_column('discord_user_id')
