"""The database handle: one async engine per process, sessions, migrations, query counting.

SQLite (the embedded default) runs in WAL mode with foreign keys on and a busy timeout, so
several writers queue instead of failing; PostgreSQL goes through psycopg 3, the driver the
run queue (procrastinate) uses too, so one transaction can hold a decision and its job.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import event, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from hookgate.storage.schema_version import at_head
from hookgate.storage.statement_count import COUNT
from hookgate.storage.types import utcnow

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig

MIGRATIONS = Path(__file__).with_name("migrations")
#: pg_advisory_lock key held while a process migrates and syncs ("hookgate" in ASCII).
STARTUP_LOCK_KEY = 0x686F6F6B67617465
MIGRATION_LOCK_KEY = STARTUP_LOCK_KEY + 1
DEFAULT_URL = "sqlite+aiosqlite:///hookgate.db"


class DatabaseError(Exception):
    """The database cannot be reached, migrated or used."""


#: PostgreSQL URL prefixes accepted in configuration; all are served by psycopg 3.
_PG_PREFIXES = ("postgres://", "postgresql://", "postgresql+asyncpg://",
                "postgresql+psycopg://")


def _normalise(url: str) -> str:
    # ``postgresql+asyncpg://`` URLs in existing configurations keep working: the scheme
    # names a driver, and hookgate uses one driver (psycopg) for SQLAlchemy and the queue.
    for prefix in _PG_PREFIXES:
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    if url.startswith("sqlite:///") or url == "sqlite://":
        url = "sqlite+aiosqlite" + url[len("sqlite"):]
    return url


class Database:
    """An async SQLAlchemy engine plus a session factory; ``queries`` counts statements."""

    def __init__(self, url: str = DEFAULT_URL, *, echo: bool = False) -> None:
        self.url = _normalise(url)
        kwargs: dict[str, Any] = {"echo": echo}
        if self.is_sqlite:
            kwargs["connect_args"] = {"timeout": 30}
        else:
            kwargs.update(pool_size=10, max_overflow=20)
        try:
            self.engine: AsyncEngine = create_async_engine(self.url, **kwargs)
        except (ArgumentError, ImportError) as exc:
            raise DatabaseError(f"database URL {url!r} is not usable: {exc}") from exc
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self.queries = 0
        event.listen(self.engine.sync_engine, "before_cursor_execute", self._count)
        if COUNT.enabled:
            event.listen(self.engine.sync_engine, "before_cursor_execute", COUNT.statement)
            event.listen(self.engine.sync_engine, "begin", COUNT.transaction)
            COUNT.start()
        if self.is_sqlite:
            event.listen(self.engine.sync_engine, "connect", _sqlite_pragmas)

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")

    def _count(self, *_: Any) -> None:
        self.queries += 1

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        async with self.sessions() as s:
            yield s

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        async with self.sessions() as s, s.begin():
            yield s

    async def now(self) -> datetime:
        """The database's clock (PostgreSQL); this process's clock for a SQLite file, which
        only processes of one machine share. Decision and expiry times come from here."""
        if self.is_sqlite:
            return utcnow()
        async with self.session() as s:
            value = (await s.execute(text("SELECT now()"))).scalar_one()
        return value.astimezone(UTC)  # type: ignore[no-any-return]

    @asynccontextmanager
    async def startup_lock(self) -> AsyncIterator[None]:
        """Serialise start-up work (migrations, schema, config sync) across the processes
        starting on one PostgreSQL database, with a session advisory lock."""
        if self.is_sqlite:
            yield
            return
        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": STARTUP_LOCK_KEY})
            await conn.commit()
            try:
                yield
            finally:
                await conn.execute(text("SELECT pg_advisory_unlock(:k)"),
                                   {"k": STARTUP_LOCK_KEY})
                await conn.commit()

    async def upgrade(self, revision: str = "head") -> None:
        """Bring the schema to ``revision`` with the bundled Alembic migrations."""
        try:
            if revision == "head" and await at_head(self.engine, MIGRATIONS / "versions"):
                return
            async with self.engine.begin() as conn:
                if not self.is_sqlite:  # one migrator at a time; the others find it done
                    await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"),
                                       {"k": MIGRATION_LOCK_KEY})
                await conn.run_sync(_run_upgrade, revision)
        except Exception as exc:
            raise DatabaseError(f"migrating {self.safe_url} failed: {exc}") from exc

    async def notify(self, session: AsyncSession, channel: str, payload: str) -> None:
        """NOTIFY ``channel`` when ``session``'s transaction commits (PostgreSQL only)."""
        if not self.is_sqlite:
            await session.execute(text("SELECT pg_notify(:c, :p)"),
                                  {"c": channel, "p": payload})

    @property
    def libpq_url(self) -> str:
        """The URL in libpq's form (``postgresql://``), for psycopg and procrastinate."""
        return self.engine.url.set(drivername="postgresql").render_as_string(
            hide_password=False)

    @property
    def safe_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    async def dispose(self) -> None:
        await self.engine.dispose()


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def alembic_config() -> AlembicConfig:
    # Alembic costs about 0.2 s to import; only migrating pays for it.
    from alembic.config import Config as AlembicConfig

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def _run_upgrade(conn: Connection, revision: str) -> None:
    from alembic import command

    cfg = alembic_config()
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, revision)


def run_upgrade_sync(url: str, revision: str = "head") -> None:
    """Upgrade from synchronous code (the CLI)."""
    db = Database(url)

    async def go() -> None:
        try:
            await db.upgrade(revision)
        finally:
            await db.dispose()

    asyncio.run(go())
