"""session_facts: an index of each session's requests alone (``kind = 'request'``). A
request is kept once per session; the check read every fact of the session through
``ix_session_facts_session``, results included, so it grew with the session
(decision record 0047).

Revision ID: 0032
Revises: 0031
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0032'
down_revision = '0031'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_session_facts_requests', 'session_facts', ['session'],
                    postgresql_where=sa.text("kind = 'request'"),
                    sqlite_where=sa.text("kind = 'request'"))


def downgrade() -> None:
    op.drop_index('ix_session_facts_requests', table_name='session_facts')
