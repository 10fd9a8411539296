"""oidc_logins, oidc_identities, oidc_sessions: people signed in through an OpenID Connect
provider (sign-ins under way, who each provider identity is, and their sessions).

Revision ID: 0028
Revises: 0027
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import hookgate.storage.types

revision = '0028'
down_revision = '0027'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'oidc_logins',
        sa.Column('state', sa.String(length=128), nullable=False),
        sa.Column('nonce', sa.String(length=128), nullable=False),
        sa.Column('code_verifier', sa.String(length=128), nullable=False),
        sa.Column('binding_sha256', sa.String(length=64), nullable=False),
        sa.Column('return_to', sa.String(length=512), nullable=False),
        sa.Column('created_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('state'),
    )
    op.create_table(
        'oidc_identities',
        sa.Column('issuer', sa.String(length=512), nullable=False),
        sa.Column('subject', sa.String(length=255), nullable=False),
        sa.Column('user_id', sa.String(length=128), nullable=False),
        sa.Column('email', sa.String(length=320), nullable=True),
        sa.Column('groups', sa.JSON(), nullable=False),
        sa.Column('updated_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column('refused_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['user_id'], ['users.id']),
        sa.PrimaryKeyConstraint('issuer', 'subject'),
        sa.UniqueConstraint('user_id'),
    )
    op.create_table(
        'oidc_sessions',
        sa.Column('id_sha256', sa.String(length=64), nullable=False),
        sa.Column('user_id', sa.String(length=128), nullable=False),
        sa.Column('issuer', sa.String(length=512), nullable=False),
        sa.Column('subject', sa.String(length=255), nullable=False),
        sa.Column('kind', sa.String(length=16), nullable=False),
        sa.Column('csrf_token', sa.String(length=64), nullable=False),
        sa.Column('refresh_token', sa.Text(), nullable=True),
        sa.Column('created_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column('expires_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column('checked_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column('ended_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column('ended_reason', sa.String(length=512), nullable=True),
        sa.ForeignKeyConstraint(['user_id'], ['users.id']),
        sa.PrimaryKeyConstraint('id_sha256'),
    )
    op.create_index('ix_oidc_sessions_user_id', 'oidc_sessions', ['user_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_oidc_sessions_user_id', table_name='oidc_sessions')
    op.drop_table('oidc_sessions')
    op.drop_table('oidc_identities')
    op.drop_table('oidc_logins')
