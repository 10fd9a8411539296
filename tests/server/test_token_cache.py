"""Bearer tokens are looked up once per few seconds, and a revoked token stops working
within that time (server/token_cache.py), on a real server."""

from __future__ import annotations

import time

import httpx
import pytest
from sqlalchemy import text

from hookgate.server import auth as auth_module
from hookgate.server import token_cache
from hookgate.server.runtime import Caller, Runtime
from hookgate.storage.database import Database
from tests.live_server import live_server
from tests.server.demo_world import auth, world


async def _revoke(url: str, user: str) -> None:
    db = Database(url)
    try:
        async with db.engine.begin() as conn:
            await conn.execute(text("UPDATE users SET token_sha256 = NULL WHERE id = :u"),
                               {"u": user})
    finally:
        await db.dispose()


@pytest.mark.both_databases
def test_a_revoked_token_stops_working_within_the_ttl(database_url: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(token_cache, "TTL_S", 0.5)
    lookups: list[str] = []
    real = Runtime.authenticate

    async def counted(self: Runtime, token: str) -> Caller | None:
        lookups.append(token)
        return await real(self, token)

    monkeypatch.setattr(Runtime, "authenticate", counted)
    deployment, _ = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        cache = auth_module.token_cache(srv.runtime)
        assert cache.ttl_s == 0.5
        for _ in range(10):
            assert c.get("/api/runs", headers=auth("alice")).status_code == 200
        assert len(lookups) == 1  # ten requests within the TTL: one database lookup
        assert c.get("/api/runs", headers=auth("bob")).status_code == 200

        srv.call(_revoke(database_url, "alice"))
        revoked_at = time.monotonic()
        deadline = revoked_at + 5
        while c.get("/api/runs", headers=auth("alice")).status_code == 200:
            assert time.monotonic() < deadline, "the revoked token kept working"
            time.sleep(0.05)
        assert time.monotonic() - revoked_at <= 0.5 + 0.3
        assert c.get("/api/runs", headers=auth("alice")).status_code == 401
        assert c.get("/api/runs", headers=auth("bob")).status_code == 200


async def test_only_valid_tokens_are_remembered_and_only_by_digest() -> None:
    cache: token_cache.TokenCache[str] = token_cache.TokenCache(ttl_s=60, max_entries=2)
    calls: list[str] = []

    async def load(token: str) -> str | None:
        calls.append(token)
        return None if token == "bad" else f"user-{token}"

    assert await cache.lookup("bad", load) is None
    assert await cache.lookup("bad", load) is None
    assert await cache.lookup("a", load) == "user-a"
    assert await cache.lookup("a", load) == "user-a"
    assert calls == ["bad", "bad", "a"]
    assert all(key != "a" and len(key) == 64 for key in cache._entries)
    await cache.lookup("b", load)
    await cache.lookup("c", load)  # over max_entries: the oldest ("a") goes
    assert await cache.lookup("a", load) == "user-a"
    assert calls == ["bad", "bad", "a", "b", "c", "a"]
    cache.clear()
    await cache.lookup("c", load)
    assert calls[-1] == "c"
