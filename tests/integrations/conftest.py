"""The hookgates the adapters' tests ask: in process (AsyncLocalGuard over the world's
configuration, SQLite), and one real hookgate server on loopback per database backend (the
app `hookgate serve` runs, from the same configuration file), shared by the tests of every
framework."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from hookgate.approvals.eligibility import Approver
from hookgate.client import AsyncClient
from hookgate.client.local import AsyncLocalGuard
from hookgate.config import load_config
from hookgate.runtime.deployment import deployment_from_config
from hookgate.storage.audit import AuditLogStore
from tests.adversarial.conftest import attempt
from tests.conftest import _drop_pg_database, migrated_database_url
from tests.integrations.world import ALICE_TOKEN, write_config
from tests.live_server import live_server

__all__ = ["attempt", "inbox", "local_guard", "served"]

ALICE = Approver("alice", "acme", admin=True)


class Inbox:
    """A person deciding in the inbox of the in-process hookgate."""

    def __init__(self, guard: AsyncLocalGuard) -> None:
        self.guard = guard

    async def decide(self, request_id: str, decision: str, *, reason: str | None = None,
                     arguments: dict[str, Any] | None = None) -> None:
        rt = await self.guard.runtime()
        await rt.approvals.decide(request_id, decision, ALICE, reason, arguments=arguments)

    async def audit(self, org: str = "acme") -> list[dict[str, Any]]:
        rt = await self.guard.runtime()
        return await AuditLogStore.shared(rt.db).page(org, limit=200)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def local_guard(request: pytest.FixtureRequest,
                      tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[AsyncLocalGuard]:
    """The in-process hookgate (SQLite) as the framework named by the module's FRAMEWORK."""
    folder = tmp_path_factory.mktemp("hookgate")
    config = write_config(folder, f"sqlite+aiosqlite:///{folder / 'hookgate.db'}")
    guard = AsyncLocalGuard(config, framework=request.module.FRAMEWORK)
    yield guard
    await guard.aclose()


@pytest.fixture(scope="module")
def inbox(local_guard: AsyncLocalGuard) -> Inbox:
    return Inbox(local_guard)


@dataclass
class Served:
    """A real `hookgate serve` and its inbox over HTTP."""

    url: str

    def client(self, framework: str) -> AsyncClient:
        """An agent process's guard: the HTTP client of this server."""
        return AsyncClient(self.url, ALICE_TOKEN, framework=framework)

    def decide(self, request_id: str, decision: str, **body: Any) -> None:
        r = httpx.post(f"{self.url}/api/confirmations/{request_id}/respond",
                       json={"decision": decision, **body},
                       headers={"Authorization": f"Bearer {ALICE_TOKEN}"})
        assert r.status_code == 200, r.text


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def served(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A hookgate server on SQLite and one on PostgreSQL, each for the whole session."""
    folder: Path = tmp_path_factory.mktemp(f"served-{request.param}")
    url = migrated_database_url(request, folder)
    server = None if request.param == "sqlite" else request.getfixturevalue(
        "postgres_server_url")
    deployment = deployment_from_config(load_config(write_config(folder, url)))
    try:
        with live_server(deployment) as srv:
            yield Served(srv.url)
    finally:
        if server is not None:
            _drop_pg_database(server, url)
