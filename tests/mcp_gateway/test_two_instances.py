"""The same gated call reaching two real `hookgate serve` processes on one PostgreSQL at the
same moment: one approval request (the database picks the winner), one card in Slack (the
fake Web API on loopback), one downstream run, and both callers get its result once a person
approves."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from hookgate.runtime.channel_records import SECRETS_KEY_ENV, SecretsKey
from tests.conftest import _fresh_pg_database
from tests.fakes.slack import FakeSlack
from tests.instances import Instance
from tests.mcp_gateway.world import (
    McpWorld,
    audit_rows,
    auth,
    decide,
    eventually,
    http_client,
    make_world,
    outcome,
    pending_requests,
    text,
)

#: Each call lingers in a PreToolUse hook before the gate: both instances are past their
#: look for an earlier request before either has written one.
LINGER = "          - audit_log\n          - {name: tests.hookfixtures:Linger, " \
         "params: {seconds: 1.5}}\n"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def pair(tmp_path: Path, request: pytest.FixtureRequest, slack: FakeSlack
         ) -> Iterator[tuple[McpWorld, Instance, Instance]]:
    # Git's is the only tool called: neither instance starts a time server.
    world = make_world(tmp_path, _fresh_pg_database(request.getfixturevalue(
        "postgres_server_url")), coder_servers=["git"])
    config = world.config_path.read_text().replace("          - audit_log\n", LINGER, 1)
    channel = {"id": "ops-slack", "type": "slack", "org": "acme",
               "config": slack.channel_config()}
    config = config.replace("agents:\n", f"channels: [{json.dumps(channel)}]\nagents:\n", 1)
    world.config_path.write_text(config)
    env = {SECRETS_KEY_ENV: SecretsKey.generate()}
    first = Instance("a", world.config_path, tmp_path, env=env)
    second = Instance("b", world.config_path, tmp_path, env=env)
    try:
        first.spawn()
        first.wait_up()  # the schema is migrated once, by the first
        second.spawn()
        second.wait_up()
        yield world, first, second
    finally:
        first.stop()
        second.stop()


def request_rows(world: McpWorld) -> list[tuple[str, str]]:
    dsn = world.config().database.replace("postgresql+asyncpg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [(str(r[0]), str(r[1])) for r in conn.execute(
            "SELECT id, status FROM confirmation_requests").fetchall()]


async def test_one_request_one_card_and_one_run_for_the_same_call_on_two_instances(
        pair: tuple[McpWorld, Instance, Instance], slack: FakeSlack) -> None:
    world, first, second = pair
    args = {"repo_path": str(world.repo), "branch_name": "raced"}
    async with http_client(f"{first.url}/mcp/coder", "alice") as one, \
            http_client(f"{second.url}/mcp/coder", "alice") as two, \
            httpx.AsyncClient(base_url=first.url, timeout=30) as api:
        calls = [asyncio.create_task(c.call_tool("mcp__git__git_create_branch", args))
                 for c in (one, two)]
        found = await eventually(lambda: pending_requests(api), "a pending request")
        # Both instances are past the gate's request creation by now.
        await asyncio.sleep(2.5)
        assert len(await pending_requests(api)) == 1, await pending_requests(api)
        assert len(request_rows(world)) == 1, request_rows(world)
        assert not any(c.done() for c in calls)
        assert len(slack.messages) == 1, slack.messages
        r = await api.get("/api/confirmations", params={"status": "pending"},
                          headers=auth("bob"))
        assert [p["id"] for p in r.json()] == [found[0]["id"]]
        await decide(api, found[0]["id"], "approve")
        results = await asyncio.wait_for(asyncio.gather(*calls), 60)
        rows = await audit_rows(api, tool="mcp__git__git_create_branch")
    for result in results:
        assert not result.is_error, text(result)
        assert "raced" in text(result)
        assert outcome(result)["request_id"] == found[0]["id"]
    assert world.branches() == ["main", "raced"]
    # One run downstream (a second git_create_branch would have failed: the branch exists);
    # the other caller got the recorded result.
    assert sorted(r["outcome"] for r in rows) == ["ok", "ok"]
    assert sorted((r["detail"] or "").startswith("replay:") for r in rows) == [False, True]
    assert len(slack.messages) == 1 and slack.violations == []
    assert len({r["tool_call_id"] for r in rows}) == 1
