"""Standing rules and quorum: ``approval_rules`` (an approver's "approve and remember":
scope, expiry, an argument constraint, revocation, uses), ``approval_votes`` (one row per
person and request, unique, so a quorum counts distinct people), and on each request how
many approvals it needs, whether its requester may approve it, and who approved so far.

Revision ID: 0011
Revises: 0009
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import hookgate.storage.types

revision = '0011'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'approval_rules',
        sa.Column('id', sa.String(length=64), nullable=False),
        sa.Column('org_id', sa.String(length=128), nullable=True),
        sa.Column('agent_id', sa.String(length=128), nullable=False),
        sa.Column('tool_name', sa.String(length=256), nullable=False),
        sa.Column('scope', sa.String(length=16), nullable=False),
        sa.Column('run_id', sa.String(length=64), nullable=True),
        sa.Column('user_id', sa.String(length=128), nullable=True),
        sa.Column('when', sa.Text(), nullable=True),
        sa.Column('created_by', sa.String(length=128), nullable=False),
        sa.Column('created_at', hookgate.storage.types.UTCDateTime(timezone=True),
                  nullable=False),
        sa.Column('expires_at', hookgate.storage.types.UTCDateTime(timezone=True),
                  nullable=True),
        sa.Column('from_request_id', sa.String(length=64), nullable=True),
        sa.Column('revoked_at', hookgate.storage.types.UTCDateTime(timezone=True),
                  nullable=True),
        sa.Column('revoked_by', sa.String(length=128), nullable=True),
        sa.Column('uses', sa.Integer(), server_default='0', nullable=False),
        sa.Column('last_used_at', hookgate.storage.types.UTCDateTime(timezone=True),
                  nullable=True),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_approval_rules_lookup', 'approval_rules',
                    ['org_id', 'agent_id', 'tool_name'], unique=False)
    op.create_table(
        'approval_votes',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('request_id', sa.String(length=64), nullable=False),
        sa.Column('user_id', sa.String(length=128), nullable=False),
        sa.Column('decision', sa.String(length=16), nullable=False),
        sa.Column('via', sa.String(length=16), nullable=True),
        sa.Column('channel_identity', sa.String(length=256), nullable=True),
        sa.Column('reason', sa.Text(), nullable=True),
        sa.Column('created_at', hookgate.storage.types.UTCDateTime(timezone=True),
                  nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('request_id', 'user_id', name='uq_approval_vote_person'),
    )
    with op.batch_alter_table('confirmation_requests', schema=None) as batch_op:
        batch_op.add_column(sa.Column('approvals_required', sa.Integer(),
                                      server_default='1', nullable=False))
        batch_op.add_column(sa.Column('allow_self_approval', sa.Boolean(),
                                      server_default=sa.true(), nullable=False))
        batch_op.add_column(sa.Column('approvals', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('confirmation_requests', schema=None) as batch_op:
        batch_op.drop_column('approvals')
        batch_op.drop_column('allow_self_approval')
        batch_op.drop_column('approvals_required')
    op.drop_table('approval_votes')
    op.drop_index('ix_approval_rules_lookup', table_name='approval_rules')
    op.drop_table('approval_rules')
