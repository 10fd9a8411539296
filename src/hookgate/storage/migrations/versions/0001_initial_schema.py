"""Initial schema: orgs, users, agents, channels, confirmation requests, runs, run events,
tool executions and channel callback dedupe keys.

Revision ID: 0001
Revises: 
Create Date: 2026-11-29 21:22:31.667027
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import hookgate.storage.types

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('channel_callbacks_seen',
    sa.Column('channel_id', sa.String(length=128), nullable=False),
    sa.Column('dedupe_key', sa.String(length=512), nullable=False),
    sa.Column('seen_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('channel_id', 'dedupe_key')
    )
    op.create_table('confirmation_requests',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('run_id', sa.String(length=64), nullable=False),
    sa.Column('tool_call_id', sa.String(length=128), nullable=False),
    sa.Column('agent_id', sa.String(length=128), nullable=False),
    sa.Column('requested_by', sa.String(length=128), nullable=True),
    sa.Column('org_id', sa.String(length=128), nullable=True),
    sa.Column('mode', sa.String(length=16), nullable=False),
    sa.Column('channel_id', sa.String(length=128), nullable=True),
    sa.Column('approver_scope', sa.String(length=32), nullable=False),
    sa.Column('agent_owner_id', sa.String(length=128), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('tool_name', sa.String(length=256), nullable=False),
    sa.Column('args', sa.JSON(), nullable=False),
    sa.Column('args_sha256', sa.String(length=64), nullable=False),
    sa.Column('created_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('expires_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('responded_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=True),
    sa.Column('responded_by', sa.String(length=128), nullable=True),
    sa.Column('responder_channel_identity', sa.String(length=256), nullable=True),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('delivery_ref', sa.JSON(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('run_id', 'tool_call_id', name='uq_confirmation_run_call')
    )
    with op.batch_alter_table('confirmation_requests', schema=None) as batch_op:
        batch_op.create_index('ix_confirmation_org_status', ['org_id', 'status'], unique=False)
        batch_op.create_index(batch_op.f('ix_confirmation_requests_status'), ['status'], unique=False)
        batch_op.create_index('ix_confirmation_responded_at', ['responded_at'], unique=False)

    op.create_table('orgs',
    sa.Column('id', sa.String(length=128), nullable=False),
    sa.Column('name', sa.String(length=256), nullable=False),
    sa.Column('read_only', sa.Boolean(), nullable=False),
    sa.Column('created_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('run_events',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('run_id', sa.String(length=64), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('type', sa.String(length=64), nullable=False),
    sa.Column('data', sa.JSON(), nullable=False),
    sa.Column('created_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('run_id', 'seq', name='uq_run_event_seq')
    )
    with op.batch_alter_table('run_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_run_events_run_id'), ['run_id'], unique=False)

    op.create_table('runs',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('agent_id', sa.String(length=128), nullable=False),
    sa.Column('org_id', sa.String(length=128), nullable=True),
    sa.Column('user_id', sa.String(length=128), nullable=True),
    sa.Column('conversation_id', sa.String(length=128), nullable=True),
    sa.Column('engine', sa.String(length=32), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('state_json', sa.Text(), nullable=False),
    sa.Column('answer', sa.Text(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_runs_org_id'), ['org_id'], unique=False)
        batch_op.create_index('ix_runs_status', ['status'], unique=False)

    op.create_table('tool_executions',
    sa.Column('run_id', sa.String(length=64), nullable=False),
    sa.Column('tool_call_id', sa.String(length=128), nullable=False),
    sa.Column('tool_name', sa.String(length=256), nullable=False),
    sa.Column('args_sha256', sa.String(length=64), nullable=False),
    sa.Column('started_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('finished_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=True),
    sa.Column('observation', sa.Text(), nullable=True),
    sa.Column('ok', sa.Boolean(), nullable=True),
    sa.PrimaryKeyConstraint('run_id', 'tool_call_id')
    )
    op.create_table('agents',
    sa.Column('id', sa.String(length=128), nullable=False),
    sa.Column('org_id', sa.String(length=128), nullable=True),
    sa.Column('name', sa.String(length=256), nullable=False),
    sa.Column('owner_user_id', sa.String(length=128), nullable=True),
    sa.Column('definition', sa.JSON(), nullable=False),
    sa.Column('updated_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['org_id'], ['orgs.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('agents', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_agents_org_id'), ['org_id'], unique=False)

    op.create_table('channels',
    sa.Column('id', sa.String(length=128), nullable=False),
    sa.Column('org_id', sa.String(length=128), nullable=False),
    sa.Column('type', sa.String(length=32), nullable=False),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('config_encrypted', sa.Text(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('created_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['org_id'], ['orgs.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('channels', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_channels_org_id'), ['org_id'], unique=False)

    op.create_table('users',
    sa.Column('id', sa.String(length=128), nullable=False),
    sa.Column('org_id', sa.String(length=128), nullable=False),
    sa.Column('name', sa.String(length=256), nullable=False),
    sa.Column('admin', sa.Boolean(), nullable=False),
    sa.Column('token_sha256', sa.String(length=64), nullable=True),
    sa.Column('feishu_open_id', sa.String(length=128), nullable=True),
    sa.Column('slack_user_id', sa.String(length=128), nullable=True),
    sa.Column('wecom_userid', sa.String(length=128), nullable=True),
    sa.Column('created_at', hookgate.storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['org_id'], ['orgs.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('token_sha256')
    )
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_users_feishu_open_id'), ['feishu_open_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_users_org_id'), ['org_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_users_slack_user_id'), ['slack_user_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_users_wecom_userid'), ['wecom_userid'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_users_wecom_userid'))
        batch_op.drop_index(batch_op.f('ix_users_slack_user_id'))
        batch_op.drop_index(batch_op.f('ix_users_org_id'))
        batch_op.drop_index(batch_op.f('ix_users_feishu_open_id'))

    op.drop_table('users')
    with op.batch_alter_table('channels', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_channels_org_id'))

    op.drop_table('channels')
    with op.batch_alter_table('agents', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_agents_org_id'))

    op.drop_table('agents')
    op.drop_table('tool_executions')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index('ix_runs_status')
        batch_op.drop_index(batch_op.f('ix_runs_org_id'))

    op.drop_table('runs')
    with op.batch_alter_table('run_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_run_events_run_id'))

    op.drop_table('run_events')
    op.drop_table('orgs')
    with op.batch_alter_table('confirmation_requests', schema=None) as batch_op:
        batch_op.drop_index('ix_confirmation_responded_at')
        batch_op.drop_index(batch_op.f('ix_confirmation_requests_status'))
        batch_op.drop_index('ix_confirmation_org_status')

    op.drop_table('confirmation_requests')
    op.drop_table('channel_callbacks_seen')
