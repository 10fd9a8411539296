"""The database handle: one async engine per process, sessions, migrations, query counting.

SQLite (the embedded default) runs in WAL mode with foreign keys on and a busy timeout, so
several writers queue instead of failing; PostgreSQL goes through psycopg 3, the driver the
run queue (procrastinate) uses too, so one transaction can hold a decision and its job.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import event
from sqlalchemy.engine import Connection, ExceptionContext, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from hookgate.storage.backends import POOL_SIZE as POOL_SIZE  # re-exported
from hookgate.storage.backends import Backend, backend_class
from hookgate.storage.backends.postgresql import MIGRATION_LOCK_KEY as MIGRATION_LOCK_KEY
from hookgate.storage.backends.postgresql import STARTUP_LOCK_KEY as STARTUP_LOCK_KEY
from hookgate.storage.head_schema import create_at_head
from hookgate.storage.schema_version import at_head
from hookgate.storage.statement_count import COUNT

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig

    from hookgate.storage.transaction import Transaction

MIGRATIONS = Path(__file__).with_name("migrations")
DEFAULT_URL = "sqlite+aiosqlite:///hookgate.db"
log = logging.getLogger(__name__)
_QUOTED_ARGUMENT = re.compile(r"(invalid input for query argument \$\d+):.*", re.DOTALL)
#: PostgreSQL's context lines in psycopg's messages: the statement ("LINE 1: SELECT …" and
#: its caret line) and the values of a violated key ("DETAIL:  Key (id)=(…)").
_STATEMENT_CONTEXT = re.compile(r"^(LINE \d+: .*|\s*\^\s*|DETAIL: .*)\n?", re.MULTILINE)


#: Key in a session's ``info`` of the wake-ups to publish after its commit.
_NOTES = "hookgate_notes"


class Publisher(Protocol):
    """Publishes committed wake-ups (channel, payload) somewhere other than PostgreSQL."""

    async def publish(self, notes: Sequence[tuple[str, str]]) -> None: ...


class DatabaseError(Exception):
    """The database cannot be reached, migrated or used."""


#: PostgreSQL URL prefixes accepted in configuration; all are served by psycopg 3.
_PG_PREFIXES = ("postgres://", "postgresql://", "postgresql+asyncpg://",
                "postgresql+psycopg://")


def normalised_url(url: str) -> str:
    """``url`` as the database handle uses it (psycopg for PostgreSQL, aiosqlite for SQLite)."""
    # ``postgresql+asyncpg://`` URLs in existing configurations keep working: the scheme
    # names a driver, and hookgate uses one driver (psycopg) for SQLAlchemy and the queue.
    for prefix in _PG_PREFIXES:
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    if url.startswith("sqlite:///") or url == "sqlite://":
        url = "sqlite+aiosqlite" + url[len("sqlite"):]
    return url


def describe_database(url: str) -> str:
    """Where ``url`` points, for people: a SQLite file's absolute path, else the URL with its
    password hidden."""
    try:
        parsed = make_url(normalised_url(url))
    except ArgumentError:
        return url
    if parsed.drivername.startswith("sqlite"):
        file = parsed.database or ""
        if not file or file == ":memory:" or "mode=memory" in str(parsed.query):
            return "SQLite in memory (gone when the process ends)"
        return f"SQLite file {Path(file).resolve()}"
    return parsed.render_as_string(hide_password=True)


class Database:
    """An async SQLAlchemy engine plus a session factory; ``queries`` counts statements."""

    def __init__(self, url: str = DEFAULT_URL, *, echo: bool = False,
                 publisher: Publisher | None = None) -> None:
        self.url = normalised_url(url)
        kind = backend_class(self.url)  # the one choice of database
        try:
            self.engine: AsyncEngine = create_async_engine(
                self.url, echo=echo, **kind.engine_options())
        except (ArgumentError, ImportError) as exc:
            raise DatabaseError(f"database URL {url!r} is not usable: {exc}") from exc
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self._reads = async_sessionmaker(
            self.engine.execution_options(isolation_level="AUTOCOMMIT"),
            expire_on_commit=False) if kind.reads_in_autocommit else self.sessions
        self.queries = 0
        self._closers: list[Callable[[], Awaitable[None]]] = []
        #: Carries notify() wake-ups instead of NOTIFY (runs/redis_wakeups.py).
        #: What carries wake-ups once a transaction commits, instead of PostgreSQL's NOTIFY
        #: (Redis pub/sub with ``redis_url``); None: NOTIFY, or memory for a SQLite file.
        self.publisher = publisher
        event.listen(self.engine.sync_engine, "before_cursor_execute", self._count)
        if COUNT.enabled:
            event.listen(self.engine.sync_engine, "before_cursor_execute", COUNT.statement)
            event.listen(self.engine.sync_engine, "begin", COUNT.transaction)
            COUNT.start()
        event.listen(self.engine.sync_engine, "handle_error", _without_statement)
        kind.prepare_engine(self.engine)
        #: The database's backend, chosen once here: its fast path and hot operations.
        self.backend: Backend = kind(self)

    def _count(self, *_: Any) -> None:
        self.queries += 1

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """A session for reads; writes go through ``transaction()``."""
        async with self._reads() as s:
            yield s

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        async with self.sessions() as s:
            async with s.begin():
                yield s
            notes = s.info.pop(_NOTES, None)
        if notes and self.publisher is not None:  # committed: now wake the readers
            await self.publisher.publish(notes)

    async def now(self) -> datetime:
        """The database's clock (PostgreSQL); this process's clock for a SQLite file, which
        only processes of one machine share. Decision and expiry times come from here."""
        return await self.backend.now()

    @asynccontextmanager
    async def startup_lock(self) -> AsyncIterator[None]:
        """Serialise start-up work (migrations, schema, config sync) across the processes
        starting on one PostgreSQL database, with a session advisory lock."""
        async with self.backend.startup_lock():
            yield

    async def upgrade(self, revision: str = "head") -> None:
        """Bring the schema to ``revision`` with the bundled Alembic migrations. At "head",
        a database already there is left alone and an empty one is made from the rendered
        head schema (head_schema.py), neither importing Alembic; so is one that another
        process made meanwhile (it held the migration lock)."""
        versions = MIGRATIONS / "versions"
        try:
            if revision == "head" and (
                    await at_head(self.engine, versions)
                    or await create_at_head(self.engine, self.backend, versions)
                    or await at_head(self.engine, versions)):
                return
            async with self.engine.begin() as conn:
                await self.backend.lock_migrations(conn)
                await conn.run_sync(_run_upgrade, revision)
        except Exception as exc:
            folder = self._missing_sqlite_folder()
            why = f"the folder {folder} does not exist" if folder else str(exc)
            raise DatabaseError(f"migrating {self.safe_url} failed: {why}") from exc

    def _missing_sqlite_folder(self) -> Path | None:
        file = self.backend.sqlite_file
        if file is None:
            return None
        folder = Path(file).resolve().parent
        return None if folder.is_dir() else folder

    async def notify(self, session: Transaction, channel: str, payload: str) -> None:
        """Wake ``channel``'s readers when ``session``'s transaction (one of
        ``transaction()``) commits: NOTIFY on PostgreSQL, or through ``publisher`` when one
        is set (Redis). Nothing for a SQLite file (one process, woken in memory)."""
        await self.backend.notify(session, channel, payload)

    def queue_note(self, session: AsyncSession, channel: str, payload: str) -> None:
        """Have ``publisher`` carry (channel, payload) once ``session``'s transaction
        commits."""
        session.info.setdefault(_NOTES, []).append((channel, payload))

    @property
    def libpq_url(self) -> str:
        """The URL in libpq's form (``postgresql://``), for psycopg and procrastinate."""
        return self.engine.url.set(drivername="postgresql").render_as_string(
            hide_password=False)

    @property
    def safe_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def on_dispose(self, close: Callable[[], Awaitable[None]]) -> None:
        """Run ``close`` when the database is disposed (connections kept outside the
        engine's pool, such as the PostgreSQL driver's own)."""
        self._closers.append(close)

    async def dispose(self) -> None:
        closers, self._closers = self._closers, []
        for close in closers:
            await close()
        await self.engine.dispose()


def _without_statement(context: ExceptionContext) -> None:
    # A database error's text reaches run errors, tool observations and API answers; the
    # SQL and its parameters (arguments, tokens' digests) must not. The class stays (callers
    # catch IntegrityError); the statement goes to the debug log only.
    error = context.sqlalchemy_exception
    if error is None:
        return
    log.debug("database error %s on: %s", type(error).__name__, context.statement)
    error.statement = None
    error.params = None
    error.hide_parameters = True
    if error.args and isinstance(error.args[0], str):
        # asyncpg quotes the value it could not encode: "query argument $1: '<value>' (...)";
        # keep only why (for a lone surrogate: "surrogates not allowed").
        why = _unicode_reason(context.original_exception)
        shown = r"\1 (the value is not shown" + (f": {why})" if why else ")")
        message = _STATEMENT_CONTEXT.sub("", _QUOTED_ARGUMENT.sub(shown, error.args[0]))
        error.args = (message.rstrip("\n"), *error.args[1:])


def _unicode_reason(exc: BaseException | None) -> str | None:
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, UnicodeError):
            return str(getattr(exc, "reason", "")) or type(exc).__name__
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


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
