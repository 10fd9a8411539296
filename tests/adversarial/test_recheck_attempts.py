"""State checked before a long wait is checked again: an admin switches the org to read-only
while a person decides about a write, then the person approves. On every engine path over a
real database the write does not run; a hook that declares ``recheck_after_approval`` (on
its instance) runs again too, and a call that waited for nobody is checked once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from hookgate import DAGEngine, HookContext, HookResult, PreToolUseHook, ReActEngine, ScriptedLLM
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.catalog.builtin.readonly_guard import READ_ONLY_MESSAGE
from hookgate.engines import DelegatingReActEngine, Delegation
from hookgate.engines.result import RunResult
from hookgate.storage.database import Database
from hookgate.storage.orgs import set_org_read_only, sync_orgs
from hookgate.workflows import WorkflowRunner, parse_workflow
from tests.adversarial.conftest import Tally
from tests.engines.world import ALICE, GATED, Bank, events, make_agent, pending, services

pytestmark = pytest.mark.both_databases

PAY = {"name": "oa__purchase_pay", "args": {"amount": GATED, "vendor": "ACME"}}

#: Whether the budget service says yes; flipped by the tests while a person decides.
BUDGET = {"open": True, "asked": 0}


class BudgetGuard(PreToolUseHook):
    """A check whose answer can change during the wait; it says so on its instance."""

    name = "budget_guard"
    priority = 20

    def __init__(self) -> None:
        self.recheck_after_approval = True

    async def execute(self, ctx: HookContext) -> HookResult:
        BUDGET["asked"] += 1
        if BUDGET["open"]:
            return HookResult()
        return HookResult(allow=False, error="Blocked: the budget is closed.")


async def writable(db: Database) -> None:
    await sync_orgs(db, [("acme", "ACME", False)])


async def flip_then_approve(db: Database, approvals: PersistentApprovals,
                            run: Awaitable[RunResult],
                            flip: Callable[[], Awaitable[None]] | None = None) -> RunResult:
    task = asyncio.ensure_future(run)
    [request] = await pending(approvals)
    if flip is None:
        await set_org_read_only(db, "acme", True)
    else:
        await flip()
    await approvals.decide(request.id, "approve", ALICE)
    return await asyncio.wait_for(task, 15)


def assert_blocked_after_approval(result: RunResult, by: str, message: str) -> None:
    blocked = [e for e in result.trace if e["type"] in ("tool_blocked", "tool_result")
               and e["tool_name"] == "oa__purchase_pay"]
    assert [(b["status"], b["blocked_by"]) for b in blocked] == [("blocked", by)]
    assert message in blocked[0]["observation"]
    assert "checked again right before the call, after the approval" in blocked[0][
        "observation"]
    assert any(h["hook"] == "approval_gate" and h["kind"] == "side_effect"
               for h in blocked[0]["hooks"])  # it was approved, then re-checked


async def test_react_a_write_approved_after_the_org_turned_read_only_does_not_run(
        db: Database, approvals: PersistentApprovals, attempt: Tally) -> None:
    await writable(db)
    bank = Bank()
    engine = ReActEngine(ScriptedLLM([{"tool_calls": [PAY]}, {"answer": "done"}]),
                         **services(db, approvals))
    result = await flip_then_approve(db, approvals, engine.run(
        make_agent(bank, "buyer", "readonly_guard"), "pay", user_id="alice"))
    attempt.record("react: write approved while the org turned read-only", bool(
        bank.payments))
    assert bank.payments == []
    assert_blocked_after_approval(result, "readonly_guard", READ_ONLY_MESSAGE)


async def test_dag_a_step_approved_after_the_org_turned_read_only_does_not_run(
        db: Database, approvals: PersistentApprovals, attempt: Tally) -> None:
    await writable(db)
    bank = Bank()
    plan = {"plan": {"steps": [{"id": "pay", "tool": PAY["name"], "args": PAY["args"]}]}}
    engine = DAGEngine(ScriptedLLM([plan, {"answer": "done"}]), **services(db, approvals))
    result = await flip_then_approve(db, approvals, engine.run(
        make_agent(bank, "buyer", "readonly_guard"), "pay", user_id="alice"))
    attempt.record("dag: write approved while the org turned read-only", bool(bank.payments))
    assert bank.payments == []
    assert_blocked_after_approval(result, "readonly_guard", READ_ONLY_MESSAGE)


async def test_delegation_a_delegates_write_approved_after_read_only_does_not_run(
        db: Database, approvals: PersistentApprovals, attempt: Tally) -> None:
    await writable(db)
    bank = Bank()
    buyer = make_agent(bank, "buyer", delegates=["payer"])
    buyer.tools = []
    payer = make_agent(bank, "payer", "readonly_guard")
    models = {"buyer": ScriptedLLM([
        {"tool_calls": [{"name": "call_agent", "args": {"agent_id": "payer",
                                                        "message": "pay ACME"}}]},
        {"answer": "done"}]),
        "payer": ScriptedLLM([{"tool_calls": [PAY]}, {"answer": "paid"}])}
    engine = DelegatingReActEngine(models["buyer"], delegation=Delegation(
        {"buyer": buyer, "payer": payer}, models.__getitem__), **services(db, approvals))
    result = await flip_then_approve(db, approvals, engine.run(
        buyer, "pay", user_id="alice", org_id="acme"))
    attempt.record("delegation: write approved while the org turned read-only",
                   bool(bank.payments))
    assert bank.payments == []
    [end] = events(result.trace, "delegate_end")
    child = [e for e in end["trace"] if e["type"] == "tool_blocked"]
    assert [c["blocked_by"] for c in child] == ["readonly_guard"]


@pytest.mark.parametrize("node", ["tool", "agent"])
async def test_workflow_a_node_approved_after_read_only_does_not_run(
        db: Database, approvals: PersistentApprovals, attempt: Tally, node: str) -> None:
    await writable(db)
    bank = Bank()
    spec = ({"id": "pay", "type": "tool", "tool": PAY["name"], "args": PAY["args"]}
            if node == "tool" else {"id": "pay", "type": "agent", "agent": "payer",
                                    "message": "pay"})
    workflow = parse_workflow({"id": "w", "as_agent": "buyer", "nodes": [spec]})
    models = {"payer": ScriptedLLM([{"tool_calls": [PAY]}, {"answer": "paid"}])}
    runner = WorkflowRunner({"w": workflow}, {
        "buyer": make_agent(bank, "buyer", "readonly_guard"),
        "payer": make_agent(bank, "payer", "readonly_guard")},
        models.__getitem__, **services(db, approvals))
    result = await flip_then_approve(db, approvals, runner.run("w", user_id="alice"))
    attempt.record(f"workflow {node} node: write approved while read-only",
                   bool(bank.payments))
    assert bank.payments == []
    if node == "tool":
        assert events(result.trace, "node_result")[0]["status"] == "blocked"
        assert_blocked_after_approval(result, "readonly_guard", READ_ONLY_MESSAGE)
    else:
        [child] = events(result.trace, "agent_node")
        assert [e["blocked_by"] for e in child["trace"] if e["type"] == "tool_blocked"] == [
            "readonly_guard"]


async def test_a_hook_declaring_recheck_on_its_instance_runs_again_after_approval(
        db: Database, approvals: PersistentApprovals, attempt: Tally) -> None:
    BUDGET.update(open=True, asked=0)
    bank = Bank()
    agent = make_agent(bank, "buyer", f"{__name__}:BudgetGuard")

    async def close_budget() -> None:
        BUDGET["open"] = False

    engine = ReActEngine(ScriptedLLM([{"tool_calls": [PAY]}, {"answer": "done"}]),
                         **services(db, approvals))
    result = await flip_then_approve(db, approvals, engine.run(agent, "pay",
                                                               user_id="alice"),
                                     close_budget)
    attempt.record("declared recheck hook closed during the wait", bool(bank.payments))
    assert bank.payments == [] and BUDGET["asked"] == 2
    assert_blocked_after_approval(result, "budget_guard", "the budget is closed")

    # A call that waits for nobody is checked once, and a recheck that still says yes
    # lets the approved call run.
    BUDGET.update(open=True, asked=0)
    quote = {"name": "oa__quote", "args": {"vendor": "ACME"}}
    engine = ReActEngine(ScriptedLLM([{"tool_calls": [quote]}, {"answer": "done"}]),
                         **services(db, approvals))
    await engine.run(agent, "quote", user_id="alice")
    assert BUDGET["asked"] == 1 and bank.quotes == 1

    async def nothing() -> None:
        return None

    engine = ReActEngine(ScriptedLLM([{"tool_calls": [PAY]}, {"answer": "done"}]),
                         **services(db, approvals))
    await flip_then_approve(db, approvals, engine.run(agent, "pay", user_id="alice"),
                            nothing)
    assert BUDGET["asked"] == 3 and bank.payments == [{"amount": float(GATED),
                                                       "vendor": "ACME"}]


def test_readonly_guard_declares_the_recheck() -> None:
    from hookgate.catalog.builtin.readonly_guard import ReadonlyGuard

    assert ReadonlyGuard.recheck_after_approval is True
    assert PreToolUseHook.recheck_after_approval is False  # others opt in


async def test_a_declared_command_hook_can_ask_to_be_checked_again(
        db: Database, approvals: PersistentApprovals, attempt: Tally, tmp_path: Any) -> None:
    flag, log = tmp_path / "closed", tmp_path / "runs.log"
    command = (f"echo run >> {log}; if [ -e {flag} ]; then echo 'budget closed' >&2; "
               "exit 2; fi")
    bank = Bank()
    agent = make_agent(bank)
    agent.model_config_json["hooks"]["command_hooks"] = [{
        "event": "PreToolUse", "matcher": "oa__purchase_pay", "name": "budget-check",
        "command": command, "recheck_after_approval": True}]

    async def close() -> None:
        flag.write_text("")

    engine = ReActEngine(ScriptedLLM([{"tool_calls": [PAY]}, {"answer": "done"}]),
                         **services(db, approvals))
    result = await flip_then_approve(db, approvals, engine.run(agent, "pay", user_id="alice"),
                                     close)
    attempt.record("declared command recheck closed during the wait", bool(bank.payments))
    assert bank.payments == [] and log.read_text().count("run") == 2
    assert_blocked_after_approval(result, "budget-check", "budget closed")


@pytest.mark.parametrize(("event", "value", "error"), [
    ("PostToolUse", True, "applies to PreToolUse hooks only"),
    ("PreToolUse", "yes", "must be true or false")])
def test_a_recheck_declaration_that_cannot_hold_is_refused(event: str, value: Any,
                                                          error: str) -> None:
    from hookgate.catalog.build import build_registry
    from hookgate.hooks.errors import HookBuildError

    agent = make_agent(Bank())
    agent.model_config_json["hooks"]["command_hooks"] = [{
        "event": event, "command": "true", "recheck_after_approval": value}]
    with pytest.raises(HookBuildError, match=error):
        build_registry(agent)
