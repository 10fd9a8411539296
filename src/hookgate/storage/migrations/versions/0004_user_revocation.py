"""Revocation: users can be disabled (a user the configuration file no longer declares is),
their tokens can expire, and revoked token digests are kept so no sync reinstates them.

Revision ID: 0004
Revises: 0008
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import hookgate.storage.types

revision = '0004'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('disabled', sa.Boolean(), nullable=False,
                                      server_default=sa.false()))
        batch_op.add_column(sa.Column('declared', sa.Boolean(), nullable=False,
                                      server_default=sa.false()))
        batch_op.add_column(sa.Column(
            'token_expires_at', hookgate.storage.types.UTCDateTime(timezone=True),
            nullable=True))
    op.create_table('revoked_tokens',
    sa.Column('token_sha256', sa.String(length=64), nullable=False),
    sa.Column('user_id', sa.String(length=128), nullable=False),
    sa.Column('revoked_by', sa.String(length=128), nullable=True),
    sa.Column('revoked_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('token_sha256')
    )


def downgrade() -> None:
    op.drop_table('revoked_tokens')
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('token_expires_at')
        batch_op.drop_column('declared')
        batch_op.drop_column('disabled')
