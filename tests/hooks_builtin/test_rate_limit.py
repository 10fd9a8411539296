"""`connector_rate_limit`: exactly N calls per window per connector and caller — under
concurrency, across processes, in the database or in Redis — and a refusal that says when
to try again."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from hookgate import Agent
from hookgate.catalog.build import BuildEnv, build_registry
from hookgate.catalog.builtin.rate_limit import ConnectorRateLimit
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.registry import HookRegistry
from hookgate.hooks.services import HookServices
from hookgate.storage.database import Database
from hookgate.storage.rate_limits import RedisRateCounter
from hookgate.tools import CallIdentity, ToolCall, execute_tool_call
from hookgate.tools.guarded_call import new_call
from tests.hooks_builtin.procs import fire_rate_limited, oa__purchase_pay
from tests.hooks_builtin.test_audit_log import worker
from tests.hooks_builtin.world import OA, agent, call, run, sql, tool_events
from tests.redis_server import running_redis

RETRY = re.compile(r"Retry in (\d+) seconds?\.$")


def limit(rates: dict[str, str], **params: object) -> dict[str, object]:
    return {"name": "connector_rate_limit", "params": {"limits": rates, **params}}


@pytest.mark.both_databases
async def test_a_hundred_concurrent_calls_against_a_limit_of_ten_let_exactly_ten_through(
        db: Database) -> None:
    assert await fire_rate_limited(db, 100, 10) == 10


@pytest.mark.both_databases
async def test_two_processes_share_one_limit_exactly(db: Database, database_url: str) -> None:
    start_at = time.time() + 2.5
    procs = [await worker("rate", database_url, "100", str(start_at), "10") for _ in range(2)]
    outputs = [await asyncio.wait_for(p.communicate(), 90) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs

    allowed = [json.loads(out)["allowed"] for out, _ in outputs]
    assert sum(allowed) == 10, allowed


@pytest.mark.both_databases
async def test_the_refusal_says_in_how_many_seconds_to_retry(db: Database) -> None:
    oa = OA()
    result = await run(db, agent(oa, limit({"oa": "2/hour"})),
                       *[call("oa__purchase_pay", amount=i, vendor="ACME") for i in (1, 2, 3)])

    first, second, third = tool_events(result)
    assert first["status"] == second["status"] == "ok"
    assert third["status"] == "blocked" and third["blocked_by"] == "connector_rate_limit"
    assert third["observation"].startswith(
        "Rate limit reached: connector 'oa' allows 2/hour per user, and user 'alice' used "
        "them all.")
    seconds = int(RETRY.search(third["observation"]).group(1))  # type: ignore[union-attr]
    window_left = 3600 - time.time() % 3600
    assert abs(seconds - window_left) <= 2
    assert len(oa.payments) == 2


@pytest.mark.both_databases
async def test_a_new_window_lets_calls_through_again(db: Database) -> None:
    hook = build(db, {"limits": {"oa": "2/2s"}})
    assert await allowed(hook, 3) == 2
    await asyncio.sleep(2.05 - time.time() % 2)  # into the next window
    assert await allowed(hook, 3) == 2


@pytest.mark.both_databases
async def test_each_user_has_a_limit_and_an_org_wide_limit_is_shared(db: Database) -> None:
    assert await fire_rate_limited(db, 30, 5, users=("alice", "bob", "carol")) == 15
    await sql(db, "DELETE FROM rate_limit_counters")
    assert await fire_rate_limited(db, 30, 5, per="org", users=("alice", "bob", "carol")) == 5


@pytest.mark.both_databases
async def test_connectors_without_a_limit_are_not_counted(db: Database) -> None:
    oa = OA()
    result = await run(db, agent(oa, limit({"oa": "1/hour"})),
                       *[call("crm__lookup", customer=str(i)) for i in range(3)])
    assert [e["status"] for e in tool_events(result)] == ["ok", "ok", "ok"]


@pytest.mark.both_databases
async def test_counters_that_cannot_be_reached_block_the_call(db: Database) -> None:
    await sql(db, "DROP TABLE rate_limit_counters")
    oa = OA()

    result = await run(db, agent(oa, limit({"oa": "10/minute"})),
                       call("oa__purchase_pay", amount=1, vendor="ACME"))

    (pay,) = tool_events(result)
    assert pay["status"] == "blocked" and pay["blocked_by"] == "connector_rate_limit"
    assert pay["observation"].startswith("Blocked: hook 'connector_rate_limit' failed")
    assert oa.payments == []


@pytest.mark.parametrize(("params", "problem"), [
    ({}, "limits must map connectors to rates"),
    ({"limits": {"oa": "ten a minute"}}, "limits.oa: 'ten a minute' is not a rate"),
    ({"limits": {"oa": "0/minute"}}, "must allow at least one call"),
    ({"limits": {"oa": "1/minute"}, "per": "team"}, "per must be 'user' or 'org'"),
    ({"limits": {"oa": "1/minute"}, "window": 3}, "unknown params 'window'"),
])
def test_a_bad_declaration_stops_the_agent_naming_the_entry(
        params: dict[str, object], problem: str) -> None:
    oa = OA()
    db = Database("sqlite+aiosqlite:///unused.db")  # named, never opened
    with pytest.raises(HookBuildError) as info:
        build_registry(agent(oa, {"name": "connector_rate_limit", "params": params}),
                       HookServices(database=db))
    assert "hooks.class_hooks[0] 'connector_rate_limit'" in str(info.value)
    assert problem in str(info.value)


# -- Redis ----------------------------------------------------------------------------------


@pytest.fixture
def redis_url() -> Iterator[str]:
    with running_redis() as server:
        yield server.url


@pytest.fixture
async def redis_counters(redis_url: str) -> AsyncIterator[str]:
    yield redis_url
    for client in RedisRateCounter._clients.get(asyncio.get_running_loop(), {}).values():
        await client.aclose()


async def test_redis_counters_let_exactly_ten_of_a_hundred_through(
        redis_counters: str) -> None:
    hook = ConnectorRateLimit.from_declaration(
        {"limits": {"oa": "10/hour"}, "redis_url": redis_counters},
        BuildEnv(Agent(id="a", name="a", instructions="", tools=[]), HookServices()))
    assert await allowed(hook, 100) == 10
    slot = await hook.counter.take("oa|3600s|user:alice", 10, 3600, time.time())
    assert not slot.allowed and 0 < slot.retry_after <= 3600


def test_a_redis_limit_needs_no_database() -> None:
    pytest.importorskip("redis", reason="needs the redis package")
    hook = ConnectorRateLimit.from_declaration(
        {"limits": {"oa": "1/minute"}, "redis_url": "redis://127.0.0.1:1/0"},
        BuildEnv(Agent(id="a", name="a", instructions="", tools=[]), HookServices()))
    assert isinstance(hook.counter, RedisRateCounter)


# -- helpers --------------------------------------------------------------------------------


def build(db: Database, params: dict[str, object]) -> ConnectorRateLimit:
    return ConnectorRateLimit.from_declaration(
        params, BuildEnv(Agent(id="a", name="a", instructions="", tools=[]),
                         HookServices(database=db)))


async def allowed(hook: ConnectorRateLimit, n: int) -> int:
    registry = HookRegistry([hook])
    identity = CallIdentity(agent_id="buyer", user_id="alice", org_id="acme", run_id="r")
    outcomes = await asyncio.gather(*(
        execute_tool_call(
            new_call(identity, ToolCall(f"c{i}", "oa__purchase_pay", {"amount": 1}),
                     {"oa__purchase_pay": oa__purchase_pay}),
            registry=registry)
        for i in range(n)))
    return sum(o.allowed for o in outcomes)
