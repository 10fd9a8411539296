"""Workflows: tool nodes take the guarded path as the declared agent, agent nodes run with
their own registries, conditions are safe expressions, and a workflow that cannot be built
or checked does not start."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hookgate import HookServices, ScriptedLLM
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.config import ConfigError, parse_config
from hookgate.storage.database import Database
from hookgate.workflows import WorkflowError, WorkflowRunner, parse_workflow
from tests.engines.world import (
    ALICE,
    GATED,
    Bank,
    approvals,
    events,
    make_agent,
    pending,
    services,
)

__all__ = ["approvals"]

RECORD = {"name": "tests.hookfixtures:RecordCall"}


def pay_if_cheap(limit: int = 50_000,
                 amount: str = "{{ quote.amount }}") -> dict[str, Any]:
    return {
        "id": "pay_if_cheap",
        "as_agent": "buyer",
        "nodes": [
            {"id": "quote", "type": "tool", "tool": "oa__quote", "args": {"vendor": "ACME"}},
            {"id": "cheap", "type": "condition", "expr": f"quote.amount <= {limit}"},
            {"id": "pay", "type": "tool", "tool": "oa__purchase_pay",
             "args": {"amount": amount, "vendor": "{{ quote.vendor }}"}},
            {"id": "note", "type": "tool", "tool": "db__write_note",
             "args": {"text": "paid {{ quote.amount }} to {{ quote['vendor'] }}"}},
        ],
        "edges": [{"from": "quote", "to": "cheap"}, {"from": "cheap", "to": "pay", "when": True},
                  {"from": "pay", "to": "note"}],
    }


def runner(bank: Bank, workflow: dict[str, Any], **kw: Any) -> WorkflowRunner:
    wf = parse_workflow(workflow)
    agents = kw.pop("agents", None) or {"buyer": make_agent(bank, "buyer", RECORD)}
    models = kw.pop("models", {})
    return WorkflowRunner({wf.id: wf}, agents, lambda agent_id: models[agent_id], **kw)


async def test_tool_nodes_take_the_guarded_path_as_the_declared_agent() -> None:
    bank = Bank()
    journal: list[Any] = []
    result = await runner(bank, pay_if_cheap(),
                          services=HookServices(extra={"journal": journal})).run(
        "pay_if_cheap", user_id="alice")

    assert result.status == "completed", result.error
    assert bank.payments == [{"amount": 1200.0, "vendor": "ACME"}]
    assert bank.notes == ["paid 1200 to ACME"]
    assert [(tool_name, meta["execution_path"], meta["tool_call_id"], meta["org_id"])
            for _, tool_name, _, meta in journal] == [
        ("oa__quote", "workflow", "node_quote", "acme"),
        ("oa__purchase_pay", "workflow", "node_pay", "acme"),
        ("db__write_note", "workflow", "node_note", "acme")]
    assert result.answer == "noted"


async def test_a_false_condition_skips_its_branch_with_the_reason() -> None:
    bank = Bank()
    result = await runner(bank, pay_if_cheap(limit=1000)).run("pay_if_cheap")

    assert result.status == "completed"
    assert bank.payments == [] and bank.notes == []
    assert [(e["node_id"], e["reason"]) for e in events(result.trace, "step_skipped")] == [
        ("pay", "condition 'cheap' is False"), ("note", "node 'pay' was skipped")]


@pytest.mark.both_databases
async def test_a_gated_workflow_payment_waits_for_a_person_and_a_rejection_stops_the_rest(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    wf = runner(bank, pay_if_cheap(limit=100_000, amount=str(GATED)), **services(db, approvals))
    task = asyncio.create_task(wf.run("pay_if_cheap", user_id="alice"))

    [request] = await pending(approvals)
    assert (request.agent_id, request.tool_name, request.args["amount"]) == (
        "buyer", "oa__purchase_pay", GATED)
    await approvals.decide(request.id, "reject", ALICE, reason="no")
    result = await asyncio.wait_for(task, 10)

    assert bank.payments == [] and bank.notes == []
    [skipped] = events(result.trace, "step_skipped")
    assert skipped["reason"] == "node 'pay' was blocked"


async def test_an_agent_node_runs_its_agent_with_that_agents_own_hooks() -> None:
    bank = Bank()
    journal: list[Any] = []
    writer = make_agent(bank, "writer", {"name": "tests.hookfixtures:RecordCall",
                                         "params": {"name": "writer_hook"}})
    models = {"writer": ScriptedLLM([
        {"tool_calls": [{"name": "db__write_note", "args": {"text": "report"}}]},
        {"answer": "Report filed."}])}
    workflow = {"id": "report", "as_agent": "buyer", "nodes": [
        {"id": "quote", "type": "tool", "tool": "oa__quote", "args": {"vendor": "ACME"}},
        {"id": "write", "type": "agent", "agent": "writer",
         "message": "ACME charges {{ quote.amount }}"}],
        "edges": [{"from": "quote", "to": "write"}]}
    wf = runner(bank, workflow, agents={"buyer": make_agent(bank, "buyer"), "writer": writer},
                models=models, services=HookServices(extra={"journal": journal}))

    result = await wf.run("report", user_id="alice")

    assert result.status == "completed" and result.answer == "Report filed."
    [(hook, tool_name, _, meta)] = journal
    assert (hook, tool_name, meta["execution_path"]) == ("writer_hook", "db__write_note",
                                                        "workflow")
    [node] = events(result.trace, "agent_node")
    assert node["child_run_id"] == meta["run_id"] == f"{result.run_id}.write"
    assert events(node["trace"], "session_start")[0]["agent_id"] == "writer"


async def test_a_workflow_with_an_agent_that_cannot_be_built_does_not_start() -> None:
    bank = Bank()
    broken = make_agent(bank, "writer", "tests.nowhere:Missing")
    workflow = {"id": "w", "as_agent": "buyer", "nodes": [
        {"id": "quote", "type": "tool", "tool": "oa__quote", "args": {"vendor": "ACME"}},
        {"id": "write", "type": "agent", "agent": "writer"}],
        "edges": [{"from": "quote", "to": "write"}]}
    wf = runner(bank, workflow, agents={"buyer": make_agent(bank, "buyer"), "writer": broken})

    result = await wf.run("w")

    assert result.status == "blocked_build"
    assert result.error is not None and result.error.startswith("node 'write': agent 'writer'")
    assert bank.quotes == 0  # checked before the first node ran
    assert [e["type"] for e in result.trace] == ["error", "done"]


async def test_a_tool_the_declared_agent_lacks_is_refused_before_anything_runs() -> None:
    bank = Bank()
    workflow = {"id": "w", "as_agent": "buyer", "nodes": [
        {"id": "quote", "type": "tool", "tool": "oa__quote", "args": {"vendor": "ACME"}},
        {"id": "pay", "type": "tool", "tool": "OA__purchase_pay", "args": {}}]}
    result = await runner(bank, workflow).run("w")
    assert result.status == "failed"
    assert "node 'pay' uses tool 'OA__purchase_pay', which agent 'buyer' does not have" in (
        result.error or "")
    assert bank.quotes == 0


async def test_an_expression_cannot_reach_python_and_its_failure_skips_dependents() -> None:
    bank = Bank()
    workflow = pay_if_cheap()
    workflow["nodes"][1]["expr"] = "__import__('os').system('true')"
    result = await runner(bank, workflow).run("pay_if_cheap")
    [cheap] = [e for e in events(result.trace, "node_result") if e["node_id"] == "cheap"]
    assert cheap["status"] == "failed" and "__import__" in cheap["reason"]
    assert bank.payments == []


@pytest.mark.parametrize(("change", "why"), [
    ({"edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "a"}]}, "cycle: a → b → a"),
    ({"edges": [{"from": "a", "to": "ghost"}]}, "unknown node 'ghost'"),
    ({"edges": [{"from": "a", "to": "b", "when": True}]}, "'when' needs a condition node"),
    ({"nodes": [{"id": "a", "type": "tool", "tool": "x"}] * 2}, "node id 'a' is used twice"),
    ({"nodes": [{"id": "a", "type": "shell", "cmd": "rm"}]},
     "tag 'shell' .* does not match any of the expected tags"),
])
def test_a_malformed_workflow_is_refused_with_the_reason(change: dict[str, Any],
                                                        why: str) -> None:
    workflow = {"id": "w", "as_agent": "buyer", "nodes": [
        {"id": "a", "type": "tool", "tool": "oa__quote"},
        {"id": "b", "type": "tool", "tool": "oa__quote"}], **change}
    with pytest.raises(WorkflowError, match=why):
        parse_workflow(workflow)


def test_workflows_are_declared_in_the_configuration_file() -> None:
    models = {"s": {"type": "scripted", "turns": [{"answer": "x"}]}}
    cfg = parse_config({"models": models, "workflows": [pay_if_cheap()]})
    assert list(cfg.workflows_by_id()) == ["pay_if_cheap"]

    broken = pay_if_cheap()
    broken["edges"].append({"from": "note", "to": "quote"})
    with pytest.raises(ConfigError, match=r"workflows\[0\].*cycle"):
        parse_config({"models": models, "workflows": [broken]})


async def test_a_string_with_two_placeholders_renders_both() -> None:
    bank = Bank()
    workflow = {"id": "two", "as_agent": "buyer", "nodes": [
        {"id": "quote", "type": "tool", "tool": "oa__quote", "args": {"vendor": "ACME"}},
        {"id": "note", "type": "tool", "tool": "db__write_note",
         "args": {"text": "{{ quote.vendor }} costs {{ quote.amount }}"}},
        {"id": "tight", "type": "tool", "tool": "db__write_note",
         "args": {"text": "{{quote.vendor}}{{quote.amount}}"}}],
        "edges": [{"from": "quote", "to": "note"}, {"from": "note", "to": "tight"}]}
    result = await runner(bank, workflow).run("two", user_id="alice")
    assert result.status == "completed", result.error
    assert bank.notes == ["ACME costs 1200", "ACME1200"]


def test_a_workflow_agent_node_of_another_org_is_refused_when_the_file_loads() -> None:
    models = {"s": {"type": "scripted", "turns": [{"answer": "x"}]}}
    doc = {"orgs": [{"id": "acme"}, {"id": "other"}], "models": models,
           "agents": [{"id": "buyer", "org": "acme", "model": "s"},
                      {"id": "spy", "org": "other", "model": "s"}],
           "workflows": [{"id": "w", "as_agent": "buyer", "nodes": [
               {"id": "ask", "type": "agent", "agent": "spy", "message": "hi"}]}]}
    with pytest.raises(ConfigError, match=r"workflows\[0\]\.nodes\[0\]\.agent: agent 'spy' "
                                          r"belongs to org 'other'"):
        parse_config(doc)
    doc["workflows"][0]["nodes"][0]["agent"] = "ghost"  # type: ignore[index]
    with pytest.raises(ConfigError, match="unknown agent 'ghost'"):
        parse_config(doc)
