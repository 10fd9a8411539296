"""Can this database be served? One answer, in one line a person can act on, before a command
says it serves: the URL names a supported database, a SQLite file's folder exists, the server
answers, and the schema is at the bundled migrations or behind them (then it is migrated).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from hookgate.storage.database import MIGRATIONS, Database, DatabaseError, describe_database
from hookgate.storage.schema_version import bundled_heads, bundled_revisions

#: URL schemes hookgate serves (normalised by Database).
SUPPORTED = ("sqlite://", "sqlite+aiosqlite://", "postgres://", "postgresql://",
             "postgresql+asyncpg://", "postgresql+psycopg://")
#: How long a server may take to answer before the database counts as unreachable.
CONNECT_TIMEOUT_S = 10.0
_EXAMPLES = "sqlite+aiosqlite:///FILE or postgresql://USER@HOST:PORT/DATABASE"


class DatabaseUnusable(Exception):
    """The database cannot be served; the message is one line saying what and why."""


@dataclass(frozen=True)
class SchemaState:
    """Where the database's schema stands against the bundled migrations."""

    #: "new" (no schema yet), "migrated" (at the head) or "behind" (migrated on start).
    state: str
    revisions: frozenset[str]

    def describe(self) -> str:
        if self.state == "new":
            return "new (its schema is made on start)"
        if self.state == "behind":
            return (f"schema at {', '.join(sorted(self.revisions))}, behind this hookgate's "
                    "migrations (they are applied on start, or with `hookgate db upgrade`)")
        return "schema up to date"


def _first_line(exc: BaseException) -> str:
    cause: BaseException = exc
    while isinstance(cause, SQLAlchemyError) and cause.__cause__ is not None:
        cause = cause.__cause__
    said = str(cause).strip().splitlines()
    return said[0].strip() if said and said[0].strip() else type(cause).__name__


def _supported(url: str) -> None:
    if not url.startswith(SUPPORTED):
        scheme = url.split("://", 1)[0] if "://" in url else url
        raise DatabaseUnusable(
            f"database URL scheme {scheme!r} is not supported: use {_EXAMPLES}")


async def check_database(url: str) -> SchemaState:
    """The schema's state, or DatabaseUnusable naming what is wrong; nothing is written."""
    _supported(url)
    try:
        db = Database(url)
    except DatabaseError as exc:
        raise DatabaseUnusable(f"{exc} (use {_EXAMPLES})") from exc
    try:
        return await _probe(db)
    finally:
        await db.dispose()


async def _probe(db: Database) -> SchemaState:
    if not _sqlite_file_exists(db):  # made on start; not here, where nothing is written
        return SchemaState("new", frozenset())
    try:
        found = await asyncio.wait_for(_revisions(db), CONNECT_TIMEOUT_S)
    except TimeoutError:
        raise DatabaseUnusable(f"cannot reach the database at {describe_database(db.url)}: no "
                               f"answer in "
                               f"{CONNECT_TIMEOUT_S:g}s") from None
    except (SQLAlchemyError, OSError) as exc:
        raise DatabaseUnusable(
            f"cannot reach the database at {describe_database(db.url)}: "
            f"{_first_line(exc)}") from exc
    if not found:
        return SchemaState("new", found)
    heads = bundled_heads(MIGRATIONS / "versions")
    if heads is not None and found == heads:
        return SchemaState("migrated", found)
    known = bundled_revisions(MIGRATIONS / "versions")
    unknown = found - known
    if unknown:
        raise DatabaseUnusable(
            f"the database at {describe_database(db.url)} has schema revision "
            f"{', '.join(sorted(unknown))}, which this hookgate does not know (a newer "
            "hookgate migrated it): upgrade hookgate or use another database")
    return SchemaState("behind", found)


def _sqlite_file_exists(db: Database) -> bool:
    """False for a SQLite file not made yet; DatabaseUnusable when it cannot be made. True
    for every other database (the server is asked)."""
    file = db.backend.sqlite_file
    if not file or file == ":memory:" or file.startswith("file:"):
        return True
    path = Path(file).resolve()
    if not path.parent.is_dir():
        raise DatabaseUnusable(f"the SQLite file {path} cannot be made: the folder "
                               f"{path.parent} does not exist")
    return path.exists()


async def _revisions(db: Database) -> frozenset[str]:
    async with db.engine.connect() as conn:
        await conn.execute(text("SELECT 1"))
        try:
            rows = (await conn.execute(text("SELECT version_num FROM alembic_version"))).all()
        except SQLAlchemyError:  # no table yet: a new database
            return frozenset()
    return frozenset(str(r[0]) for r in rows)


async def readiness(db: Database) -> str | None:
    """Why a running server's database cannot serve now (unreachable, or its schema is not
    this hookgate's head), in words that name no URL or credential; None when it can."""
    try:
        found = await asyncio.wait_for(_revisions(db), CONNECT_TIMEOUT_S)
    except TimeoutError:
        return f"the database did not answer in {CONNECT_TIMEOUT_S:g}s"
    except (SQLAlchemyError, OSError) as exc:
        return f"the database cannot be reached ({type(exc).__name__})"
    heads = bundled_heads(MIGRATIONS / "versions")
    if heads is not None and found != heads:
        return (f"the database's schema ({', '.join(sorted(found)) or 'none'}) is not this "
                f"hookgate's ({', '.join(sorted(heads))}): run `hookgate db upgrade`")
    return None
