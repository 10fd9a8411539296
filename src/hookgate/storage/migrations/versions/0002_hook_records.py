"""Records of the built-in hooks: the audit log's hash-chained call rows and chain heads,
and the connector rate limits' counters.

Revision ID: 0002
Revises: 0001
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import hookgate.storage.types

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('connector_call_logs',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('chain', sa.String(length=128), nullable=False),
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.Column('created_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('tool_name', sa.String(length=256), nullable=False),
    sa.Column('connector', sa.String(length=128), nullable=True),
    sa.Column('agent_id', sa.String(length=128), nullable=True),
    sa.Column('user_id', sa.String(length=128), nullable=True),
    sa.Column('org_id', sa.String(length=128), nullable=True),
    sa.Column('run_id', sa.String(length=64), nullable=True),
    sa.Column('tool_call_id', sa.String(length=128), nullable=True),
    sa.Column('execution_path', sa.String(length=32), nullable=True),
    sa.Column('args_json', sa.Text(), nullable=False),
    sa.Column('args_sha256', sa.String(length=64), nullable=False),
    sa.Column('outcome', sa.String(length=16), nullable=False),
    sa.Column('blocked_by', sa.String(length=256), nullable=True),
    sa.Column('detail', sa.Text(), nullable=True),
    sa.Column('result_chars', sa.BigInteger(), nullable=True),
    sa.Column('result_sha256', sa.String(length=64), nullable=True),
    sa.Column('latency_us', sa.BigInteger(), nullable=False),
    sa.Column('prev_hash', sa.String(length=64), nullable=False),
    sa.Column('row_hash', sa.String(length=64), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('chain', 'seq', name='uq_call_log_chain_seq')
    )
    with op.batch_alter_table('connector_call_logs', schema=None) as batch_op:
        batch_op.create_index('ix_call_log_org_agent', ['org_id', 'agent_id'], unique=False)
        batch_op.create_index('ix_call_log_org_created', ['org_id', 'created_at'], unique=False)
        batch_op.create_index('ix_call_log_org_tool', ['org_id', 'tool_name'], unique=False)
        batch_op.create_index('ix_call_log_org_user', ['org_id', 'user_id'], unique=False)

    op.create_table('audit_chain_heads',
    sa.Column('chain', sa.String(length=128), nullable=False),
    sa.Column('last_seq', sa.BigInteger(), nullable=False),
    sa.Column('last_hash', sa.String(length=64), nullable=False),
    sa.PrimaryKeyConstraint('chain')
    )
    op.create_table('rate_limit_counters',
    sa.Column('key', sa.String(length=512), nullable=False),
    sa.Column('window_start', sa.BigInteger(), nullable=False),
    sa.Column('count', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('key')
    )


def downgrade() -> None:
    op.drop_table('rate_limit_counters')
    op.drop_table('audit_chain_heads')
    with op.batch_alter_table('connector_call_logs', schema=None) as batch_op:
        batch_op.drop_index('ix_call_log_org_user')
        batch_op.drop_index('ix_call_log_org_tool')
        batch_op.drop_index('ix_call_log_org_created')
        batch_op.drop_index('ix_call_log_org_agent')

    op.drop_table('connector_call_logs')
