"""The storage backend is chosen once, from the database's URL, and nothing outside
``storage/backends/`` asks which database it is; each hot statement is compiled once per
dialect; the SQLite backend serves a database in memory through the same statements."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import hookgate
from hookgate.engines.events import RunEvent
from hookgate.engines.interrupts import Fenced
from hookgate.storage import audit
from hookgate.storage.backends.pg_driver import PgDriver
from hookgate.storage.backends.postgresql import PostgresBackend
from hookgate.storage.backends.sqlite import SqliteBackend
from hookgate.storage.backends.sqlite_driver import SqliteDriver
from hookgate.storage.backends.statements import AUDIT_COLUMNS, compiled, statement_names
from hookgate.storage.database import Database
from hookgate.storage.fencing import take_over
from hookgate.storage.ledger import DatabaseLedger
from hookgate.storage.orgs import org_read_only, sync_orgs
from hookgate.storage.rate_limits import DatabaseRateCounter
from hookgate.storage.run_events import RunEventLog
from hookgate.storage.run_writes import Checkpoint, write_run

SRC = Path(hookgate.__file__).parent
#: What asks which database it is (or reaches a backend's connection path directly).
DISPATCH = re.compile(r"\bis_sqlite\b|dialect\.name|dialect\.driver|\bSqliteDriver\b|\bPgDriver\b"
                      r"|\bsqlite_driver\b|\bpg_driver\b|\bfor_database\b")
#: Places outside storage/backends/ still asking, each with why, and how many may remain:
#: the list only shrinks (a file here that asks less is fine; a new place fails).
STILL_ASKING = {
    # SQLAlchemy's own per-dialect hooks: a type's bind processor and Alembic's batch mode.
    "storage/types.py": 1,
    "storage/migrations/env.py": 1,
}


def test_nothing_outside_the_backends_asks_which_database_it_is() -> None:
    found: dict[str, int] = {}
    for path in SRC.rglob("*.py"):
        name = path.relative_to(SRC).as_posix()
        if name.startswith("storage/backends/"):
            continue
        hits = len(DISPATCH.findall(path.read_text(encoding="utf-8")))
        if hits:
            found[name] = hits
    grown = {name: n for name, n in found.items() if n > STILL_ASKING.get(name, 0)}
    assert not grown, (
        f"{grown}: ask the database's backend (Database.backend, storage/backends/) to do "
        "the operation instead of asking which database it is")


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_each_hot_statement_is_compiled_once_per_dialect(dialect: str) -> None:
    for name in statement_names():
        first = compiled(name, dialect)  # type: ignore[arg-type]
        assert compiled(name, dialect) is first  # type: ignore[arg-type]
        assert first.sql.split()[0] in ("SELECT", "INSERT", "UPDATE")


def test_the_audit_rows_columns_are_the_records_fields() -> None:
    rows, _ = audit._linked("c", [], 0, audit.GENESIS)
    content = {f for f in audit.AuditRecord.__dataclass_fields__}
    assert set(AUDIT_COLUMNS) == {"chain", "seq", "prev_hash", "row_hash", "hash_v", *content}
    assert rows == []


def test_the_backend_is_chosen_once_from_the_url(tmp_path: Path) -> None:
    on_file = Database(f"sqlite+aiosqlite:///{tmp_path / 'one.db'}")
    in_memory = Database("sqlite+aiosqlite:///:memory:")
    on_postgres = Database("postgresql://nobody@127.0.0.1:1/none")  # not connected
    assert isinstance(on_file.backend, SqliteBackend)
    assert isinstance(on_file.backend.driver, SqliteDriver)
    assert on_file.backend.sqlite_file == str(tmp_path / "one.db")
    assert isinstance(in_memory.backend, SqliteBackend)
    assert not isinstance(in_memory.backend.driver, SqliteDriver | PgDriver)
    assert isinstance(on_postgres.backend, PostgresBackend)
    assert on_postgres.backend.in_process is False and on_file.backend.in_process


async def test_a_database_in_memory_runs_the_same_hot_operations() -> None:
    db = Database("sqlite+aiosqlite:///:memory:")
    await db.upgrade()
    try:
        row = ("r1", "a", None, None, None, "react", "running", "{}", None, None, None)
        await write_run(db, "r1", checkpoint=Checkpoint(row),
                        events=[RunEvent("step", {"n": 1}, 1)], fence=None)
        taken = await take_over(db, "r1")
        assert taken is not None and taken.token == 1
        await RunEventLog(db).append("r1", [RunEvent("step", {"n": 2}, 2)], fence=taken)
        assert [e.seq for e in await RunEventLog(db).after("r1")] == [1, 2]
        ledger = DatabaseLedger(db)
        assert await ledger.claim("r1", "c1", "t", "d", fence=taken) is None
        await ledger.finish("r1", "c1", "done", True)
        prior = await ledger.claim("r1", "c1", "t", "d")
        assert prior is not None and (prior.observation, prior.ok) == ("done", True)
        assert await take_over(db, "r1") is not None
        with pytest.raises(Fenced):
            await ledger.claim("r1", "c2", "t", "d", fence=taken)
        await sync_orgs(db, [("acme", "ACME", True)])
        assert await org_read_only(db, "acme") is True
        counter = DatabaseRateCounter(db)
        assert [(await counter.take("k", 1, 60, 0.0)).allowed for _ in range(2)] == [True,
                                                                                     False]
    finally:
        await db.dispose()
