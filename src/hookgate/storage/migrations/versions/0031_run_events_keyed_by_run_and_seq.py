"""run_events: keyed by (run_id, seq), without the serial ``id``. Nothing reads ``id``
(every read and write goes by run and seq, through the unique (run_id, seq) index), yet
each event paid a ``nextval`` and one more index insert for it, and on PostgreSQL it was
an ``integer`` serial: after 2^31 - 1 events in a database's life every write of events
would fail, and with them every run (decision record 0039).

No statement of the version before names ``id``: its instances still running keep
writing events once this ran. On PostgreSQL the primary key's index is built here (under
the table's lock, once); the serial's index and its sequence go with the column.

Revision ID: 0031
Revises: 0030
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0031'
down_revision = '0030'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('run_events', schema=None) as batch_op:
        batch_op.drop_constraint('uq_run_event_seq', type_='unique')
        batch_op.drop_column('id')
        batch_op.create_primary_key('run_events_pkey', ['run_id', 'seq'])


def downgrade() -> None:
    # The table made again (on either database), its rows copied: the serial id numbers
    # them afresh.
    with op.batch_alter_table('run_events', schema=None, recreate='always') as batch_op:
        batch_op.drop_constraint('run_events_pkey', type_='primary')
        batch_op.add_column(sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
                            insert_before='run_id')
        batch_op.create_primary_key('run_events_pkey', ['id'])
        batch_op.create_unique_constraint('uq_run_event_seq', ['run_id', 'seq'])
