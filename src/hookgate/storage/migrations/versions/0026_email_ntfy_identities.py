"""users.email_address and users.ntfy_topic: where an email or ntfy channel reaches a person,
and how a decision link or button token is matched to a hookgate user.

Revision ID: 0026
Revises: 0025
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0026'
down_revision = '0025'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('email_address', sa.String(length=320), nullable=True))
        batch_op.add_column(sa.Column('ntfy_topic', sa.String(length=128), nullable=True))
        batch_op.create_index(batch_op.f('ix_users_email_address'), ['email_address'],
                              unique=False)
        batch_op.create_index(batch_op.f('ix_users_ntfy_topic'), ['ntfy_topic'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_users_ntfy_topic'))
        batch_op.drop_index(batch_op.f('ix_users_email_address'))
        batch_op.drop_column('ntfy_topic')
        batch_op.drop_column('email_address')
