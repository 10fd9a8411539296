"""Agents in processes of their own against one real `hookgate serve` process (on SQLite, then
on PostgreSQL): a rate limit counts the calls of two agent processes together, and an OpenAI
Agents SDK payment, or a Google ADK payment whose long-poll is cut by the restart, waiting
while hookgate is SIGKILLed and started again runs once after the decision (and never while
hookgate is down)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from hookgate.client import AsyncClient, GuardUnavailable
from tests.instances import ROOT, Instance
from tests.integrations.adk.scripted_model import Turn, scripted_model
from tests.integrations.agents_sdk_shop import (
    FRAMEWORK,
    PAY_500,
    Shop,
    buyer,
    resume,
    run,
    stored_state,
    waiting_payment,
)
from tests.integrations.conftest import Served
from tests.integrations.served_process import (
    WatchedAsyncClient,
    pending_request,
    served_process,
)
from tests.integrations.world import ALICE_TOKEN

if TYPE_CHECKING:  # the frameworks are imported where they are used: collecting is cheap
    from google.adk.events import Event
    from google.adk.sessions import InMemorySessionService

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


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def hookgate_serve(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    """One `hookgate serve` process per database backend, for the whole module."""
    with served_process(request, tmp_path_factory) as server:
        yield server


# The counting is the database's; on PostgreSQL it is covered by tests/hooks_builtin.
@pytest.mark.parametrize("hookgate_serve", ["sqlite"], indirect=True)
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
        state = await stored_state(agent, stored)
        assert await gate.apply_decisions(state) == []  # asks nothing: the run asks
        with pytest.raises(GuardUnavailable, match="unreachable"):
            await run(agent, state)
    assert shop.paid == []  # hookgate down: nothing ran

    hookgate_serve.spawn()
    hookgate_serve.wait_up()
    await asyncio.to_thread(Served(hookgate_serve.url).decide, request_id, "approve")
    async with AsyncClient(hookgate_serve.url, ALICE_TOKEN, framework=FRAMEWORK) as client:
        assert "paid 500" in await resume(client, shop, session, stored)
        assert "paid 500" in await resume(client, shop, session, stored)  # replayed
    assert shop.paid == [500]


class AdkTill:
    """A Google ADK agent whose one tool pays, guarded by HookgatePlugin over ``guard``; its
    ADK session outlives the runner (a new runner over the same sessions continues it)."""

    def __init__(self, guard: AsyncClient, turns: list[Turn],
                 sessions: InMemorySessionService | None = None) -> None:
        from google.adk.agents import LlmAgent
        from google.adk.apps import App
        from google.adk.runners import Runner
        from google.adk.sessions import InMemorySessionService

        from hookgate.integrations.adk import HookgatePlugin

        self.paid: list[int] = []
        paid = self.paid

        def pay(amount: int, to: str) -> dict[str, Any]:
            """Pay ``amount`` euros to ``to``."""
            paid.append(amount)
            return {"paid": amount, "to": to}

        self.model = scripted_model(turns)
        app = App(name="till", root_agent=LlmAgent(name="till", model=self.model, tools=[pay]),
                  plugins=[HookgatePlugin(guard, agent="buyer", wait_s=60)])
        self.sessions = sessions or InMemorySessionService()
        self.runner = Runner(app=app, session_service=self.sessions)

    async def say(self, session_id: str, text: str) -> list[Event]:
        from google.genai import types

        message = types.Content(role="user", parts=[types.Part(text=text)])
        return [event async for event in self.runner.run_async(
            user_id="alice", session_id=session_id, new_message=message)]


#: The model pays 500 (above 100: a person decides) with one function call id throughout.
ADK_PAY = ("pay", {"amount": 500, "to": "acme"}, "adk-pay-1")


@pytest.mark.asyncio(loop_scope="module")
async def test_an_adk_payment_whose_long_poll_hookgate_cut_runs_once_after_the_restart(
        hookgate_serve: Instance) -> None:
    guard = WatchedAsyncClient(hookgate_serve.url, ALICE_TOKEN, framework="adk")
    first = AdkTill(guard, [[ADK_PAY]])
    session = await first.sessions.create_session(app_name="till", user_id="alice")
    waiting = asyncio.create_task(first.say(session.id, "pay acme"))
    await asyncio.to_thread(guard.polling.wait, 30)  # the plugin long-polls for a decision
    request_id = await asyncio.to_thread(pending_request, hookgate_serve.url, "pay")
    await asyncio.to_thread(hookgate_serve.kill)
    # The client's documented answer to a cut long-poll: GuardUnavailable, saying why; the
    # plugin lets it stop the invocation, and nothing was paid.
    with pytest.raises(RuntimeError, match="unreachable"):
        await waiting
    await guard.aclose()
    assert first.paid == []

    await asyncio.to_thread(hookgate_serve.spawn)
    await asyncio.to_thread(hookgate_serve.wait_up)
    await asyncio.to_thread(Served(hookgate_serve.url).decide, request_id, "approve")
    # The app tries again in the same ADK session; the model makes the same call again, and
    # then once more: hookgate's approval covers it, once.
    async with AsyncClient(hookgate_serve.url, ALICE_TOKEN, framework="adk") as again:
        second = AdkTill(again, [[ADK_PAY], [ADK_PAY], "paid"], sessions=first.sessions)
        await second.say(session.id, "try again")
    assert second.paid == [500]
    ran, replayed = second.model.results()
    assert ran["result"] == replayed["result"] == '{"paid": 500, "to": "acme"}'
    assert "approved by alice" in ran["note"] and "note" not in replayed
