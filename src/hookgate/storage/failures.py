"""What a storage call raises when the database itself fails (unreachable, not migrated, a
statement refused), for the interfaces that report it in a line rather than a traceback."""

from __future__ import annotations

from sqlalchemy.exc import SQLAlchemyError

from hookgate.storage.database import DatabaseError

#: Catch these around a storage call to say "cannot read/write the database: ...".
DATABASE_FAILURES: tuple[type[Exception], ...] = (DatabaseError, SQLAlchemyError)
