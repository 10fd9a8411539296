"""Only a child that parked with its run is resumed when the parent's ``call_agent`` call
re-enters: a child cut off any other way (its process died mid-call) is never run again,
and a parked child whose stored arguments are not the ones the call was claimed with is
refused, so a re-entry can never start a second child or a second payment."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hookgate import Agent, ScriptedLLM, tool
from hookgate.engines import DelegatingReActEngine, Delegation
from hookgate.engines.children import call_slot
from hookgate.engines.interrupts import RunParked
from hookgate.engines.state import RunState
from hookgate.tools.ledger import InMemoryLedger
from tests.hookfixtures import ParkOnce


class Crash(BaseException):
    """The process dies in the middle of the child's tool (after its claim)."""


def world() -> tuple[DelegatingReActEngine, Agent, list[str]]:
    ran: list[str] = []

    @tool(writes=True)
    async def oa__transfer(ref: str) -> str:
        """Move money."""
        ran.append(ref)
        if len(ran) == 1:
            raise Crash()
        return f"moved {ref}"

    lead = Agent(id="lead", name="Lead", instructions="", tools=[], org_id="acme",
                 model_config_json={"delegates": ["payer"]})
    payer = Agent(id="payer", name="Payer", instructions="", tools=[oa__transfer],
                  org_id="acme")

    def lead_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        if messages[-1]["role"] == "tool":
            return {"answer": f"[{messages[-1]['content']}]"}
        return {"tool_calls": [{"name": "call_agent", "id": "c1",
                                "args": {"agent_id": "payer", "message": "move r1"}}]}

    models = {"lead": ScriptedLLM(lead_model),
              "payer": ScriptedLLM([{"tool_calls": [{"name": "oa__transfer",
                                                     "args": {"ref": "r1"}}]},
                                    {"answer": "payer done"}])}
    ledger = InMemoryLedger()
    engine = DelegatingReActEngine(
        models["lead"], ledger=ledger,
        delegation=Delegation({"lead": lead, "payer": payer}, lambda a: models[a]))
    return engine, lead, ran


async def crashed_run() -> tuple[DelegatingReActEngine, Agent, list[str], RunState]:
    engine, lead, ran = world()
    state = engine.new_state(lead, "go", user_id="alice")
    with pytest.raises(Crash):
        await engine.execute(lead, state)
    assert ran == ["r1"] and "children" not in state.extra
    # As it was stored: the parent's call_agent started and never finished.
    return engine, lead, ran, RunState.model_validate_json(state.to_json())


async def test_a_child_cut_off_mid_call_is_not_run_again_when_its_parent_resumes() -> None:
    engine, lead, ran, state = await crashed_run()
    result = await engine.execute(lead, state)
    assert ran == ["r1"]  # the transfer ran once, and no second child started
    assert result.status == "completed"
    assert "not run a second time" in (result.answer or "")


async def test_a_planted_child_with_other_arguments_is_refused() -> None:
    engine, lead, ran, state = await crashed_run()
    child = RunState(agent_id="payer", user_id="alice", org_id="acme", message="move r2")
    state.extra["children"] = {call_slot("c1"): {
        "args": {"agent_id": "payer", "message": "move r2"},
        "state": child.model_dump(mode="json")}}
    result = await engine.execute(lead, state)
    assert ran == ["r1"]
    assert "not run a second time" in (result.answer or "")


class SlowFirstSave:
    """A run store that serialises the state when asked (as the database store does) and
    is slow to commit the first save of a waiting run: a status checkpoint still in flight
    when the run parks."""

    def __init__(self) -> None:
        self.saved: list[RunState] = []
        self.slowed = False

    async def save(self, state: RunState) -> None:
        text = state.to_json()
        if state.status == "awaiting_approval" and not self.slowed:
            self.slowed = True  # the save the pending request's announcement set off
            await asyncio.sleep(0.3)
        self.saved.append(RunState.model_validate_json(text))


async def test_a_status_save_in_flight_lands_before_the_park_not_after_it() -> None:
    ParkOnce.parked.clear()
    ran: list[str] = []

    @tool(writes=True)
    async def oa__transfer(ref: str) -> str:
        """Move money."""
        ran.append(ref)
        return f"moved {ref}"

    lead = Agent(id="lead", name="Lead", instructions="", tools=[], org_id="acme",
                 model_config_json={"delegates": ["payer"]})
    payer = Agent(id="payer", name="Payer", instructions="", tools=[oa__transfer],
                  org_id="acme", model_config_json={"hooks": {"class_hooks": [
                      {"name": "tests.hookfixtures:ParkOnce",
                       "params": {"tool": "oa__transfer"}}]}})
    models = {"lead": ScriptedLLM([{"tool_calls": [{"name": "call_agent", "id": "c1", "args": {
        "agent_id": "payer", "message": "move r1"}}]}, {"answer": "lead done"}]),
              "payer": ScriptedLLM([{"tool_calls": [{"name": "oa__transfer",
                                                     "args": {"ref": "r1"}}]},
                                    {"answer": "payer done"}])}
    store = SlowFirstSave()
    engine = DelegatingReActEngine(
        models["lead"], ledger=InMemoryLedger(), store=store,
        delegation=Delegation({"lead": lead, "payer": payer}, lambda a: models[a]))
    state = engine.new_state(lead, "go", user_id="alice")
    with pytest.raises(RunParked):
        await engine.execute(lead, state)
    # The forwarded `confirmation_pending` set off a status save; the park waited for it,
    # so what the executor saves now is the last word, and it holds the parked child.
    await store.save(state)  # the executor's park
    await asyncio.sleep(0.5)  # a save that had not waited would land about now
    assert call_slot("c1") in store.saved[-1].extra["children"]
    assert store.saved[-1].status == "awaiting_approval"
    result = await engine.execute(lead, RunState.model_validate_json(state.to_json()))
    assert result.status == "completed" and ran == ["r1"]
