"""connector_call_logs: hash_v, the canonical form a row's hash covers. Rows already written
are version 1 (sorted-key JSON, ASCII-escaped); rows written from now on are version 2
(RFC 8785), so a chain that spans the upgrade still verifies row by row.

Revision ID: 0015
Revises: 0014
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Two steps: the rows already there become version 1, then a row inserted without
    # naming its version is a current one.
    with op.batch_alter_table('connector_call_logs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('hash_v', sa.SmallInteger(), nullable=False,
                                      server_default=sa.text('1')))
    with op.batch_alter_table('connector_call_logs', schema=None) as batch_op:
        batch_op.alter_column('hash_v', existing_type=sa.SmallInteger(),
                              existing_nullable=False, server_default=sa.text('2'))


def downgrade() -> None:
    with op.batch_alter_table('connector_call_logs', schema=None) as batch_op:
        batch_op.drop_column('hash_v')
