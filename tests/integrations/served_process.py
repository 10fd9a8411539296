"""A real `hookgate serve` subprocess on the adapters' configuration (tests/integrations/world.py),
on SQLite or on a fresh database of the PostgreSQL test cluster, for the tests that SIGKILL
hookgate while a framework's call waits; and the guards that say when their long-poll is in
flight."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from hookgate.client import AsyncClient, Client, Verdict
from tests.conftest import _drop_pg_database, migrated_database_url
from tests.instances import Instance
from tests.integrations.world import ALICE_TOKEN, write_config


@contextmanager
def served_process(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    """`hookgate serve` on the backend ``request.param`` names (sqlite or postgresql)."""
    backend = str(request.param)
    folder = tmp_path_factory.mktemp(f"serve-{backend}")
    url = migrated_database_url(request, folder)
    cluster = None if backend == "sqlite" else request.getfixturevalue("postgres_server_url")
    server = Instance("serve", write_config(folder, url), folder)
    server.spawn()
    try:
        server.wait_up()
        yield server
    finally:
        server.stop()
        if cluster is not None:
            _drop_pg_database(cluster, url)


def pending_request(url: str, tool: str) -> str:
    """The id of the one pending request for ``tool`` in alice's inbox, once it is there."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = httpx.get(f"{url}/api/confirmations", params={"status": "pending"},
                      headers={"Authorization": f"Bearer {ALICE_TOKEN}"}, timeout=10)
        assert r.status_code == 200, r.text
        found = [c["id"] for c in r.json() if c["payload"]["tool_name"] == tool]
        if found:
            return str(found[0])
        time.sleep(0.05)
    raise AssertionError(f"no pending request for {tool!r} reached the inbox")


class WatchedAsyncClient(AsyncClient):
    """An AsyncClient that says when its long-poll for a decision is in flight."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.polling = threading.Event()

    async def wait(self, call: str, *, timeout: float) -> Verdict:  # noqa: ASYNC109
        self.polling.set()
        return await super().wait(call, timeout=timeout)


class WatchedClient(Client):
    """A Client that says when its long-poll for a decision is in flight."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.polling = threading.Event()

    def wait(self, call: str, *, timeout: float) -> Verdict:
        self.polling.set()
        return super().wait(call, timeout=timeout)
