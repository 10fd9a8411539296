"""The same attempts on every other execution path: a DAG step, a delegate (one declared
without hooks too), a workflow's tool and agent nodes, and tool names that only look right
(case, surrounding spaces, a Cyrillic letter). None runs."""

from __future__ import annotations

from typing import Any

import pytest

from hookgate import DAGEngine, ReActEngine, ScriptedLLM
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.engines import DelegatingReActEngine, Delegation
from hookgate.storage.database import Database
from hookgate.workflows import WorkflowRunner, parse_workflow
from tests.adversarial.conftest import Tally, rejecting
from tests.engines.world import GATED, READ_ONLY, Bank, events, make_agent, services

PAY = {"amount": GATED, "vendor": "ACME"}

#: The payment tool's name as a model might bend it; each one is an unknown tool.
VARIANTS = ["OA__purchase_pay", "Oa__Purchase_Pay", " oa__purchase_pay", "oa__purchase_pay ",
            "\toa__purchase_pay\n", "\u043ea__purchase_pay", "oa__purchase_pa\u0443",
            "oa__purchase_pay\u200b"]


def plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"plan": {"steps": list(steps)}}


async def test_a_gated_dag_step_is_rejected_and_its_dependents_skip(
        db: Database, approvals: PersistentApprovals, attempt: Tally) -> None:
    bank = Bank()
    llm = ScriptedLLM([plan({"id": "pay", "tool": "oa__purchase_pay", "args": PAY},
                            {"id": "log", "tool": "db__write_note", "args": {"text": "paid"},
                             "depends_on": ["pay"]}),
                       {"answer": "done"}])
    async with rejecting(approvals) as rejected:
        result = await DAGEngine(llm, **services(db, approvals)).run(
            make_agent(bank), "pay", user_id="alice")
    attempt.record("gated payment in a DAG step", bool(bank.payments))
    assert len(rejected) == 1 and bank.payments == [] and bank.notes == []
    assert events(result.trace, "step_skipped")[0]["step_id"] == "log"


async def test_a_write_in_a_dag_step_is_blocked_while_read_only(attempt: Tally) -> None:
    bank = Bank()
    llm = ScriptedLLM([plan({"id": "a", "tool": "db__write_note", "args": {"text": "x"}},
                            {"id": "b", "tool": "oa__purchase_pay",
                             "args": {"amount": 5, "vendor": "x"}}),
                       {"answer": "done"}])
    await DAGEngine(llm).run(make_agent(bank, "buyer", READ_ONLY), "write")
    attempt.record("writes in concurrent DAG steps while read-only", bool(
        bank.notes or bank.payments))
    assert bank.notes == [] and bank.payments == []


@pytest.mark.parametrize("payer_hooks", [[], ["tests.hookfixtures:RecordCall"]],
                         ids=["no hooks", "own hooks"])
async def test_a_delegate_cannot_pay_without_a_person(
        db: Database, approvals: PersistentApprovals, attempt: Tally,
        payer_hooks: list[Any]) -> None:
    bank = Bank()
    buyer = make_agent(bank, "buyer", delegates=["payer"])
    buyer.tools = []
    payer = make_agent(bank, "payer", *payer_hooks)  # the gate is added all the same
    models = {"buyer": ScriptedLLM([
        {"tool_calls": [{"name": "call_agent", "args": {"agent_id": "payer",
                                                        "message": "pay ACME 60000"}}]},
        {"answer": "done"}]),
        "payer": ScriptedLLM([{"tool_calls": [{"name": "oa__purchase_pay", "args": PAY}]},
                              {"answer": "paid"}])}
    delegation = Delegation({"buyer": buyer, "payer": payer}, models.__getitem__)
    engine = DelegatingReActEngine(models["buyer"], delegation=delegation,
                                   **services(db, approvals))
    async with rejecting(approvals) as rejected:
        await engine.run(buyer, "pay", user_id="alice", org_id="acme")
    kind = "with its own hooks" if payer_hooks else "declared without hooks"
    attempt.record(f"gated payment through a delegate {kind}", bool(bank.payments))
    assert bank.payments == []
    assert [(r.agent_id, r.tool_name) for r in rejected] == [("payer", "oa__purchase_pay")]


async def test_a_delegate_declared_without_hooks_cannot_write_for_a_read_only_caller(
        attempt: Tally) -> None:
    bank = Bank()
    buyer = make_agent(bank, "buyer", READ_ONLY, delegates=["clerk"])
    buyer.tools = []
    clerk = make_agent(bank, "clerk")
    models = {"buyer": ScriptedLLM([
        {"tool_calls": [{"name": "call_agent", "args": {"agent_id": "clerk",
                                                        "message": "write a note"}}]},
        {"answer": "done"}]),
        "clerk": ScriptedLLM([{"tool_calls": [{"name": "db__write_note",
                                               "args": {"text": "x"}}]}, {"answer": "ok"}])}
    engine = DelegatingReActEngine(models["buyer"], delegation=Delegation(
        {"buyer": buyer, "clerk": clerk}, models.__getitem__))
    await engine.run(buyer, "write", user_id="alice", org_id="acme")
    attempt.record("write through a hookless delegate while read-only", bool(bank.notes))
    assert bank.notes == []


async def test_a_workflow_cannot_pay_without_a_person(
        db: Database, approvals: PersistentApprovals, attempt: Tally) -> None:
    bank = Bank()
    payer = make_agent(bank, "payer")
    workflow = parse_workflow({"id": "w", "as_agent": "buyer", "nodes": [
        {"id": "pay", "type": "tool", "tool": "oa__purchase_pay", "args": PAY},
        {"id": "ask", "type": "agent", "agent": "payer", "message": "pay ACME 60000"}]})
    models = {"payer": ScriptedLLM([{"tool_calls": [{"name": "oa__purchase_pay",
                                                     "args": PAY}]}, {"answer": "paid"}])}
    runner = WorkflowRunner({"w": workflow}, {"buyer": make_agent(bank), "payer": payer},
                            models.__getitem__, **services(db, approvals))
    async with rejecting(approvals) as rejected:
        await runner.run("w", user_id="alice")
    attempt.record("gated payment in a workflow tool node", bool(bank.payments))
    attempt.record("gated payment in a workflow agent node", bool(bank.payments))
    assert bank.payments == []
    assert sorted(r.agent_id for r in rejected) == ["buyer", "payer"]


@pytest.mark.parametrize("name", VARIANTS, ids=[repr(v) for v in VARIANTS])
async def test_a_tool_name_that_only_looks_right_runs_nothing_on_any_path(
        name: str, attempt: Tally) -> None:
    bank = Bank()
    args = {"amount": 10, "vendor": "ACME"}  # small: the real tool would run at once

    react = await ReActEngine(ScriptedLLM([
        {"tool_calls": [{"name": name, "args": args}]}, {"answer": "done"}])).run(
        make_agent(bank), "pay")
    assert react.tool_events()[0]["status"] == "unknown_tool"

    dag = await DAGEngine(ScriptedLLM([plan({"id": "p", "tool": name, "args": args})])).run(
        make_agent(bank), "pay")
    assert dag.status == "failed" and "unknown tool" in (dag.error or "")

    workflow = parse_workflow({"id": "w", "as_agent": "buyer", "nodes": [
        {"id": "p", "type": "tool", "tool": name, "args": args}]})
    flow = await WorkflowRunner({"w": workflow}, {"buyer": make_agent(bank)},
                                lambda _: ScriptedLLM([])).run("w")
    assert flow.status == "failed"

    attempt.record(f"tool name variant {name!r}", bool(bank.payments))
    assert bank.payments == []
