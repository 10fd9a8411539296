"""Bearer tokens are looked up once per few seconds, and a revoked token stops working
within that time (runtime/token_cache.py), on a real server."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from sqlalchemy import text

from hookgate.runtime import auth as auth_module
from hookgate.runtime import token_cache
from hookgate.runtime.runtime import Caller, Runtime
from hookgate.storage.database import Database
from tests.live_server import live_server
from tests.server.demo_world import TOKENS, auth, world


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
    monkeypatch.setattr(token_cache, "TTL_S", 1.0)
    lookups: list[tuple[str, float]] = []  # each token looked up, and when (its TTL's start
    real = Runtime.authenticate              # is at or before this moment)

    async def counted(self: Runtime, token: str) -> Caller | None:
        lookups.append((token, time.monotonic()))
        return await real(self, token)

    monkeypatch.setattr(Runtime, "authenticate", counted)
    deployment, _ = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        cache = auth_module.token_cache(srv.runtime)
        assert cache.ttl_s == 1.0
        within_ttl = 0
        for _ in range(10):
            assert c.get("/api/runs", headers=auth("alice")).status_code == 200
            if time.monotonic() < lookups[0][1] + 1.0:  # answered within the first TTL
                within_ttl += 1
                assert len(lookups) == 1  # requests within the TTL: one database lookup
        assert within_ttl >= 1
        assert c.get("/api/runs", headers=auth("bob")).status_code == 200

        srv.call(_revoke(database_url, "alice"))
        # Once the TTL of alice's last lookup has run out, however slow the machine, the
        # next request looks her token up again and finds it revoked.
        last = max(at for token, at in lookups if token == TOKENS["alice"])
        time.sleep(max(0.0, last + 1.0 - time.monotonic()) + 0.01)
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


async def test_concurrent_requests_share_one_lookup() -> None:
    cache: token_cache.TokenCache[str] = token_cache.TokenCache(ttl_s=60)
    calls: list[str] = []
    release = asyncio.Event()

    async def load(token: str) -> str | None:
        calls.append(token)
        await release.wait()
        return f"user-{token}"

    waiters = [asyncio.create_task(cache.lookup("a", load)) for _ in range(20)]
    other = asyncio.create_task(cache.lookup("b", load))
    await asyncio.sleep(0)
    waiters[0].cancel()  # one client gone: the lookup goes on for the rest
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(*waiters[1:]) == ["user-a"] * 19
    assert await other == "user-b"
    assert waiters[0].cancelled()
    assert sorted(calls) == ["a", "b"]  # one database read per token, not 21
    assert await cache.lookup("a", load) == "user-a"
    assert len(calls) == 2


async def test_a_failed_shared_lookup_fails_every_waiter_and_is_not_remembered() -> None:
    cache: token_cache.TokenCache[str] = token_cache.TokenCache(ttl_s=60)
    release = asyncio.Event()
    calls = 0

    async def broken(token: str) -> str | None:
        nonlocal calls
        calls += 1
        await release.wait()
        raise ConnectionError("database unreachable")

    waiters = [asyncio.create_task(cache.lookup("a", broken)) for _ in range(5)]
    await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert calls == 1
    assert all(isinstance(r, ConnectionError) for r in results)

    async def working(token: str) -> str | None:
        return "user-a"

    assert await cache.lookup("a", working) == "user-a"  # the failure was not remembered


async def test_clear_during_a_lookup_keeps_its_answer_out_of_the_cache() -> None:
    # A revocation in this process while a lookup is in flight: that lookup's answer (read
    # before the revocation) is neither joined by later requests nor remembered.
    cache: token_cache.TokenCache[str] = token_cache.TokenCache(ttl_s=60)
    release = asyncio.Event()
    calls: list[str] = []

    async def load(token: str) -> str | None:
        calls.append(token)
        if len(calls) == 1:
            await release.wait()
            return "stale"
        return "fresh"

    first = asyncio.create_task(cache.lookup("a", load))
    await asyncio.sleep(0)
    cache.clear()
    assert await cache.lookup("a", load) == "fresh"  # a new lookup, not the one in flight
    release.set()
    assert await first == "stale"
    assert await cache.lookup("a", load) == "fresh"
    assert calls == ["a", "a"]  # "fresh" is remembered; "stale" never was
