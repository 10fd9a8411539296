"""limit_claims: claims on session-aware limits (calls in flight or done in a sliding window,
per user, agent, session or org) and the approved calls a session has had.

Revision ID: 0029
Revises: 0028
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0029'
# 0028 is another branch's; the lead chains this one after it when merging.
down_revision = '0028'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'limit_claims',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'),
                  autoincrement=True, nullable=False),
        sa.Column('limit_key', sa.String(length=512), nullable=False),
        sa.Column('call_key', sa.String(length=512), nullable=False),
        sa.Column('kind', sa.String(length=16), nullable=False),
        sa.Column('amount', sa.BigInteger(), nullable=False),
        sa.Column('at', sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_limit_claims_key_at', 'limit_claims', ['limit_key', 'at'],
                    unique=False)
    op.create_index('ix_limit_claims_call', 'limit_claims', ['call_key'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_limit_claims_call', table_name='limit_claims')
    op.drop_index('ix_limit_claims_key_at', table_name='limit_claims')
    op.drop_table('limit_claims')
