"""users.teams_aad_object_id: a person's Microsoft Entra object id, to match a click on a
Teams approval card to a hookgate user.

Revision ID: 0024
Revises: 0023
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0024'
down_revision = '0023'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('teams_aad_object_id', sa.String(length=128),
                                      nullable=True))
        batch_op.create_index(batch_op.f('ix_users_teams_aad_object_id'),
                              ['teams_aad_object_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_users_teams_aad_object_id'))
        batch_op.drop_column('teams_aad_object_id')
