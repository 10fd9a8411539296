"""session_facts: what each session has seen (the user's request, each tool result, trusted
or untrusted by declaration), read to trace where a call's argument values came from.

Revision ID: 0027
Revises: 0026
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import hookgate.storage.types

revision = '0027'
down_revision = '0026'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'session_facts',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'),
                  autoincrement=True, nullable=False),
        sa.Column('session', sa.String(length=256), nullable=False),
        sa.Column('kind', sa.String(length=16), nullable=False),
        sa.Column('trusted', sa.Boolean(), nullable=False),
        sa.Column('source', sa.String(length=256), nullable=False),
        sa.Column('call_id', sa.String(length=128), nullable=True),
        sa.Column('text', sa.Text(), nullable=False),
        sa.Column('created_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_session_facts_session', 'session_facts', ['session', 'id'],
                    unique=False)


def downgrade() -> None:
    op.drop_index('ix_session_facts_session', table_name='session_facts')
    op.drop_table('session_facts')
