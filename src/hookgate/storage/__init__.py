"""Storage: the tables, the database handle and its Alembic migrations."""

from hookgate.storage.database import Database, DatabaseError

__all__ = ["Database", "DatabaseError"]
