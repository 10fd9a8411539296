"""The start-up fast path: a database already at the bundled head skips Alembic entirely;
one behind, empty, or with migration files that cannot be read plainly goes through it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from hookgate.storage.database import MIGRATIONS, Database
from hookgate.storage.schema_version import at_head, bundled_heads

VERSIONS = MIGRATIONS / "versions"


def test_the_bundled_head_is_the_revision_nothing_revises() -> None:
    heads = bundled_heads(VERSIONS)
    assert heads is not None and len(heads) == 1
    (head,) = heads
    parents = {line.split("=")[1].strip().strip("'\"") for p in VERSIONS.glob("*.py")
               for line in p.read_text().splitlines() if line.startswith("down_revision =")}
    assert head not in parents


def test_a_merge_or_computed_revision_answers_unknown(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("revision = 'a'\ndown_revision = None\n")
    (tmp_path / "b.py").write_text("revision = 'b'\ndown_revision = ('a', 'c')\n")
    assert bundled_heads(tmp_path) is None
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.py").write_text("revision = 'a' + 'x'\ndown_revision = None\n")
    assert bundled_heads(other) is None


@pytest.mark.both_databases
@pytest.mark.empty_database
async def test_at_head_only_when_the_database_records_the_head(database_url: str) -> None:
    db = Database(database_url)
    try:
        assert not await at_head(db.engine, VERSIONS)  # empty: no alembic_version table
        await db.upgrade()
        assert await at_head(db.engine, VERSIONS)
        async with db.engine.begin() as conn:
            await conn.execute(text("UPDATE alembic_version SET version_num = '0001'"))
        assert not await at_head(db.engine, VERSIONS)
    finally:
        await db.dispose()


def test_neither_a_new_database_nor_a_second_upgrade_imports_alembic(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'h.db'}"
    script = (
        "import asyncio, sys\n"
        "from hookgate.storage.database import Database\n"
        f"db = Database({url!r})\n"
        "asyncio.run(db.upgrade())\n"
        "print('alembic' in sys.modules)\n"
    )
    first = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           check=True)
    second = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=True)
    assert first.stdout.strip() == "False"  # made from the rendered head schema
    assert second.stdout.strip() == "False"
