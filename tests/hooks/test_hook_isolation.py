"""A hook cannot hold a call past its timeout or starve other agents (issue 9, class 6).

Real subprocesses: a command whose grandchild escaped with ``setsid`` and kept stdout open;
real threads: sync Python hooks that hang.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from hookgate import Agent, ReActEngine, RunResult, ScriptedLLM, tool
from hookgate.catalog.declarative.python_hook import SYNC_POOL
from tests.hookscripts import hanging

ran: list[str] = []
release = hanging.release


@tool
def shell__touch(name: str) -> str:
    """Record a name."""
    ran.append(name)
    return f"touched {name}"


@pytest.fixture(autouse=True)
def _reset() -> Any:
    ran.clear()
    release.clear()
    yield
    release.set()


def agent(agent_id: str, **hooks: Any) -> Agent:
    return Agent(id=agent_id, name=agent_id, instructions="", tools=[shell__touch],
                 model_config_json={"hooks": hooks}, org_id="acme")


async def run(a: Agent, *names: str) -> RunResult:
    calls = [{"name": "shell__touch", "args": {"name": n}, "id": f"c{i}"}
             for i, n in enumerate(names)]
    return await ReActEngine(ScriptedLLM([{"tool_calls": calls}, {"answer": "ok"}])).run(
        a, "go", user_id="u")


async def test_an_escaped_grandchild_holding_stdout_does_not_hold_the_call() -> None:
    # The grandchild leaves the hook's process group and session and keeps stdout open.
    hook = {"event": "PreToolUse", "timeout": 20,
            "command": "setsid sleep 30 & echo '{}'"}
    started = time.monotonic()
    result = await run(agent("a", command_hooks=[hook]), "x")
    assert time.monotonic() - started < 15  # well under the hook's 20 s timeout
    assert ran == ["x"]
    assert result.tool_events()[0]["allowed"] is True


async def test_a_timeout_holds_even_when_the_hook_left_an_escaped_grandchild() -> None:
    hook = {"event": "PreToolUse", "timeout": 0.5, "name": "stuck",
            "command": "setsid sleep 30 & sleep 30"}
    started = time.monotonic()
    result = await run(agent("a", command_hooks=[hook]), "x")
    assert time.monotonic() - started < 20  # the 0.5 s timeout, not the 30 s sleeps
    assert ran == []
    assert "timed out" in result.tool_events()[0]["observation"]


async def test_hung_sync_hooks_of_one_agent_cannot_block_another_agents_calls() -> None:
    hung = {"event": "PreToolUse", "function": "tests.hookscripts.hanging:hang",
            "timeout": 0.3, "name": "hang"}
    # Seven calls of one agent hang their hooks (more than the agent's share of threads).
    stuck = await run(agent("noisy", python_hooks=[hung]), *(f"n{i}" for i in range(7)))
    events = stuck.tool_events()
    assert ran == [] and all(not e["allowed"] for e in events)
    refused = [e for e in events if "already has" in e["observation"]]
    assert len(refused) == 7 - SYNC_POOL.per_agent  # failed closed at once, not queued
    assert SYNC_POOL.busy("noisy") == SYNC_POOL.per_agent

    # Another agent's sync hooks and calls go through meanwhile, and promptly.
    ok = {"event": "PreToolUse", "function": "tests.hookscripts.hanging:quick",
          "timeout": 2}
    other = await run(agent("quiet", python_hooks=[ok]), "q1", "q2")
    assert ran == ["q1", "q2"] and all(e["allowed"] for e in other.tool_events())
    # … while the noisy agent's hooks still hang (until released): they did not wait.
    assert SYNC_POOL.busy("noisy") == SYNC_POOL.per_agent
    # asyncio's default executor was never used by the hung hooks.
    assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), 2) == "free"

    release.set()
    for _ in range(100):
        if SYNC_POOL.busy("noisy") == 0:
            break
        await asyncio.sleep(0.02)
    assert SYNC_POOL.busy("noisy") == 0
