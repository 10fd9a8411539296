"""approval_rules.mode: a standing rule in shadow mode (``shadow``) never decides a call and
only records that it would have allowed it; ``enforce`` (every rule made before) decides.

Revision ID: 0030
Revises: 0029
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0030'
down_revision = '0029'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('approval_rules') as batch:
        batch.add_column(sa.Column('mode', sa.String(length=16), nullable=False,
                                   server_default='enforce'))


def downgrade() -> None:
    with op.batch_alter_table('approval_rules') as batch:
        batch.drop_column('mode')
