"""Agents in processes of their own against one real `hookgate serve` process: a rate limit
counts the calls of two agent processes together, and an OpenAI Agents SDK payment waiting
while hookgate restarts runs once after the decision (and never while hookgate is down)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from agents import RunState

from hookgate.client import AsyncClient, GuardUnavailable
from tests.instances import ROOT, Instance
from tests.integrations.agents_sdk_shop import (
    FRAMEWORK,
    PAY_500,
    Shop,
    buyer,
    resume,
    waiting_payment,
)
from tests.integrations.conftest import Served
from tests.integrations.world import ALICE_TOKEN, write_config

#: One agent process: three searches as hookgate agent ``scout`` (4 a day), each verdict's
#: kind printed as a JSON list.
AGENT_PROCESS = """
import json, sys
from hookgate.client import Client
with Client(sys.argv[1], sys.argv[2], framework=sys.argv[3]) as guard:
    kinds = [type(guard.before_call(agent="scout", session_id=sys.argv[4], call_id=f"s{i}",
                                    tool="search", arguments={"q": i})).__name__
             for i in range(3)]
print(json.dumps(kinds))
"""


@pytest.fixture(scope="module")
def hookgate_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    folder = tmp_path_factory.mktemp("serve")
    config = write_config(folder, f"sqlite+aiosqlite:///{folder / 'hookgate.db'}")
    server = Instance("serve", config, folder)
    server.spawn()
    try:
        server.wait_up()
        yield server
    finally:
        server.stop()


def test_a_rate_limit_counts_the_calls_of_two_agent_processes_together(
        hookgate_serve: Instance) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    agents = [subprocess.Popen(
        [sys.executable, "-c", AGENT_PROCESS, hookgate_serve.url, ALICE_TOKEN, framework,
         f"scout-{framework}"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for framework in ("langgraph", "crewai")]
    kinds: list[str] = []
    for agent in agents:
        out, err = agent.communicate(timeout=60)
        assert agent.returncode == 0, err[-2000:]
        kinds += json.loads(out)
    # 4 a day for alice, whichever process asks: 6 asks, 4 allowed, 2 refused.
    assert sorted(kinds) == ["Allowed"] * 4 + ["Denied"] * 2


@pytest.mark.asyncio(loop_scope="module")
async def test_an_agents_sdk_payment_waiting_while_hookgate_restarts_runs_once_after_the_decision(
        hookgate_serve: Instance) -> None:
    shop = Shop()
    async with AsyncClient(hookgate_serve.url, ALICE_TOKEN, framework=FRAMEWORK) as client:
        session, stored, request_id = await waiting_payment(client, shop)
    hookgate_serve.kill()
    async with AsyncClient(hookgate_serve.url, ALICE_TOKEN, framework=FRAMEWORK,
                           timeout=3) as client:
        agent, gate = buyer(client, shop, session, PAY_500)
        with pytest.raises(GuardUnavailable, match="unreachable"):
            await gate.apply_decisions(await RunState.from_string(agent, stored))
    assert shop.paid == []  # hookgate down: nothing ran

    hookgate_serve.spawn()
    hookgate_serve.wait_up()
    await asyncio.to_thread(Served(hookgate_serve.url).decide, request_id, "approve")
    async with AsyncClient(hookgate_serve.url, ALICE_TOKEN, framework=FRAMEWORK) as client:
        assert "paid 500" in await resume(client, shop, session, stored)
        assert "paid 500" in await resume(client, shop, session, stored)  # replayed
    assert shop.paid == [500]
