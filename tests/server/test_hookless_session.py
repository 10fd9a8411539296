"""A ReAct run without SessionStart hooks takes no checkpoint at its session's start (its
model's first turn is checkpointed before any tool runs). A run stopped in between starts its
session again on resume, announces it once, and ends as any other."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import replace
from typing import Any

import httpx
import pytest

from hookgate import ScriptedLLM
from tests.channels.world import eventually, finished_run, start_run, world
from tests.live_server import live_server


@pytest.mark.both_databases
async def test_a_run_stopped_during_its_first_model_turn_announces_its_session_once(
        database_url: str) -> None:
    deployment, bank = world(database_url, [])
    asked = threading.Event()
    hang = True

    async def turns(messages: list[dict[str, Any]]) -> dict[str, Any]:
        if hang:
            asked.set()
            await asyncio.sleep(3600)  # until the server stops
        return {"answer": "Nothing to pay."}

    deployment.model_for = lambda _agent_id: ScriptedLLM(turns)
    # PostgreSQL: the stopping worker cancels the hour-long turn at once (not after 5 s).
    deployment.worker = replace(deployment.worker, shutdown_grace_s=0)
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            run_id = await start_run(client)
            await eventually(asked.is_set, "the first model call")
            row = srv.call(srv.runtime.runs.store.row(run_id))
    assert row is not None and not json.loads(row.state_json)["session_started"]

    hang = False
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            run = await finished_run(client, run_id)
    assert run["status"] == "completed" and run["answer"] == "Nothing to pay."
    types = [e["type"] for e in run["trace"]]
    assert types.count("session_start") == 1, types
    assert types.count("done") == 1 and bank.transfers == []
    assert [e["seq"] for e in run["trace"]] == list(range(1, len(types) + 1))
