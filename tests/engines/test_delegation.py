"""Delegation (SPEC §3): ``call_agent`` passes the caller's hooks, and the delegate runs with
its own registry (the gate included), the caller's user and org, its own run id, and its
place in the delegation tree in every hook's metadata."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hookgate import HookServices, ScriptedLLM
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.engines import DelegatingReActEngine, Delegation
from hookgate.llm.base import ChatModel
from hookgate.storage.database import Database
from tests.engines.world import (
    ALICE,
    READ_ONLY,
    Bank,
    approvals,
    events,
    make_agent,
    pending,
    services,
)

__all__ = ["approvals"]


def calls(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args, "id": "c1"}]}


def delegate_then_echo(agent_id: str, message: str = "please") -> ChatModel:
    """Calls ``agent_id`` once, then answers with what the call returned."""

    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        if messages[-1]["role"] == "tool":
            return {"answer": f"[{messages[-1]['content']}]"}
        return calls("call_agent", {"agent_id": agent_id, "message": message})

    return ScriptedLLM(model)


def engine_for(agents: dict[str, Any], models: dict[str, ChatModel], top: str,
               **kw: Any) -> DelegatingReActEngine:
    delegation = Delegation(agents, lambda agent_id: models[agent_id])
    return DelegatingReActEngine(models[top], delegation=delegation, **kw)


async def test_a_delegate_runs_with_its_own_hooks_as_the_callers_user_and_org() -> None:
    bank = Bank()
    journal: list[Any] = []
    buyer = make_agent(bank, "buyer", {"name": "tests.hookfixtures:RecordCall",
                                       "params": {"name": "buyer_hook"}}, delegates=["payer"])
    payer = make_agent(bank, "payer", {"name": "tests.hookfixtures:RecordCall",
                                       "params": {"name": "payer_hook"}})
    models = {"buyer": delegate_then_echo("payer", "pay ACME 100"),
              "payer": ScriptedLLM([calls("oa__purchase_pay", {"amount": 100, "vendor": "ACME"}),
                                    {"answer": "paid ACME"}])}
    engine = engine_for({"buyer": buyer, "payer": payer}, models, "buyer",
                        services=HookServices(extra={"journal": journal}))

    result = await engine.run(buyer, "get it paid", user_id="alice", org_id="acme")

    assert result.status == "completed" and result.answer == "[paid ACME]"
    assert bank.payments == [{"amount": 100.0, "vendor": "ACME"}]
    (h1, t1, a1, m1), (h2, t2, _, m2) = journal
    assert (h1, t1, a1) == ("buyer_hook", "call_agent",
                            {"agent_id": "payer", "message": "pay ACME 100"})
    assert (m1["execution_path"], m1["depth"], m1["parent_agent_id"]) == ("react", 0, None)
    assert (h2, t2) == ("payer_hook", "oa__purchase_pay")  # the delegate's own hook
    assert (m2["execution_path"], m2["depth"], m2["parent_agent_id"]) == ("delegate", 1, "buyer")
    assert m2["org_id"] == "acme" and m2["run_id"] != result.run_id
    [start] = events(result.trace, "delegate_start")
    [end] = events(result.trace, "delegate_end")
    assert start["child_run_id"] == end["child_run_id"] == m2["run_id"]
    assert end["status"] == "completed"
    assert [e["type"] for e in end["trace"]][-3:] == ["tool_result", "answer", "done"]


@pytest.mark.both_databases
async def test_the_delegates_gate_follows_the_delegates_own_declaration(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    buyer = make_agent(bank, "buyer", delegates=["clerk"])
    clerk = make_agent(bank, "clerk", require_confirmation_for_all=True)
    models = {"buyer": delegate_then_echo("clerk"),
              "clerk": ScriptedLLM([calls("db__write_note", {"text": "hi"}),
                                    {"answer": "noted"}])}
    engine = engine_for({"buyer": buyer, "clerk": clerk}, models, "buyer",
                        **services(db, approvals))
    task = asyncio.create_task(engine.run(buyer, "note it", user_id="alice", org_id="acme"))

    [request] = await pending(approvals)
    assert bank.notes == []  # a note needs no approval, except for this delegate
    assert (request.agent_id, request.requested_by, request.tool_name) == (
        "clerk", "alice", "db__write_note")
    await approvals.decide(request.id, "approve", ALICE)
    result = await asyncio.wait_for(task, 10)

    assert result.answer == "[noted]" and bank.notes == ["hi"]
    [shown] = events(result.trace, "confirmation_pending")  # the caller's stream shows it
    assert shown["request_id"] == request.id
    assert shown["child_run_id"] == request.run_id != result.run_id


async def test_a_delegate_whose_hooks_cannot_be_built_does_not_run_and_the_caller_is_told(
) -> None:
    bank = Bank()
    buyer = make_agent(bank, "buyer", delegates=["payer"])
    payer = make_agent(bank, "payer", "tests.nowhere:Missing")
    models = {"buyer": delegate_then_echo("payer"),
              "payer": ScriptedLLM([calls("oa__purchase_pay", {"amount": 1, "vendor": "x"})])}

    result = await engine_for({"buyer": buyer, "payer": payer}, models, "buyer").run(
        buyer, "pay")

    assert bank.payments == []
    assert result.answer is not None
    assert "delegate 'payer' did not run: its hooks cannot be built" in result.answer
    assert "'tests.nowhere:Missing'" in result.answer
    [end] = events(result.trace, "delegate_end")
    assert end["status"] == "blocked_build"


async def test_delegation_stops_at_the_depth_limit_with_a_clear_error() -> None:
    bank = Bank()
    chain = ["a", "b", "c", "d", "e"]
    agents = {n: make_agent(bank, n, delegates=[chain[i + 1]] if i + 1 < len(chain) else [])
              for i, n in enumerate(chain)}
    models: dict[str, ChatModel] = {n: delegate_then_echo(chain[i + 1])
                                    for i, n in enumerate(chain[:-1])}
    models["e"] = ScriptedLLM([{"answer": "e ran"}])

    result = await engine_for(agents, models, "a").run(agents["a"], "go")

    assert result.answer is not None
    assert "delegation depth limit 3 reached: 'd' (depth 3) cannot call 'e'" in result.answer
    assert "e ran" not in result.answer


async def test_an_agent_cannot_delegate_to_one_it_did_not_declare() -> None:
    bank = Bank()
    buyer = make_agent(bank, "buyer", delegates=["payer"])
    admin = make_agent(bank, "admin")
    models = {"buyer": delegate_then_echo("admin"),
              "admin": ScriptedLLM([calls("oa__purchase_pay", {"amount": 1, "vendor": "x"})])}

    result = await engine_for({"buyer": buyer, "admin": admin}, models, "buyer").run(
        buyer, "go")

    assert result.answer is not None
    assert "agent 'buyer' may delegate only to payer; 'admin' is not one of them" in (
        result.answer)
    assert bank.payments == [] and events(result.trace, "delegate_start") == []


async def test_agents_without_delegates_get_no_call_agent_tool() -> None:
    shown: list[list[dict[str, Any]]] = []

    class Peek:
        async def complete(self, messages: list[Any], tools: list[dict[str, Any]]) -> Any:
            shown.append(tools)
            return await ScriptedLLM([{"answer": "hi"}]).complete(messages, tools)

    bank = Bank()
    agents = {"buyer": make_agent(bank, "buyer")}
    engine = DelegatingReActEngine(Peek(), delegation=Delegation(agents, lambda _: Peek()))
    await engine.run(agents["buyer"], "hi")
    assert "call_agent" not in [t["function"]["name"] for t in shown[0]]


async def test_delegating_to_an_agent_that_writes_is_a_write_for_the_callers_rules() -> None:
    bank = Bank()
    buyer = make_agent(bank, "buyer", READ_ONLY, delegates=["payer"])
    buyer.tools = []  # the caller itself cannot write: only through its delegate
    payer = make_agent(bank, "payer")  # declared without hooks
    models = {"buyer": delegate_then_echo("payer"),
              "payer": ScriptedLLM([calls("db__write_note", {"text": "x"}), {"answer": "ok"}])}

    result = await engine_for({"buyer": buyer, "payer": payer}, models, "buyer").run(
        buyer, "write")

    assert bank.notes == []
    assert "read-only" in (result.answer or "")
    assert events(result.trace, "delegate_start") == []
