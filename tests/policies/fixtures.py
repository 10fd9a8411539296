"""Fixtures of the policies' stories: one migrated SQLite database per test module, with
alice (admin) in acme and bob in the read-only org ro; the adversarial suite imports them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from hookgate.storage.database import Database
from hookgate.storage.orgs import sync_orgs
from hookgate.storage.users import DeclaredUser, sync_declared_users


async def _prepare(url: str) -> None:
    db = Database(url)
    try:
        await db.upgrade()
        await sync_orgs(db, [("acme", "ACME", False), ("ro", "Read-only Co", True)])
        await sync_declared_users(db, [DeclaredUser("alice", "acme", admin=True),
                                       DeclaredUser("bob", "ro")])
    finally:
        await db.dispose()


@pytest.fixture(scope="module")
def policy_db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('policies') / 'hookgate.db'}"
    asyncio.run(_prepare(url))
    return url


@pytest.fixture
async def pdb(policy_db_url: str) -> AsyncIterator[Database]:
    db = Database(policy_db_url)
    try:
        yield db
    finally:
        await db.dispose()


