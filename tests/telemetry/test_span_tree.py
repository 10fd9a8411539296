"""One run, seen in an OpenTelemetry backend: the span tree of a run with a blocked call, an
approved call (and the wait for the person), a delegated child run and a failed hook, in the
GenAI conventions plus hookgate's own spans, and the metrics that count them."""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from hookgate import Agent, ScriptedLLM
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.engines import DelegatingReActEngine, Delegation
from hookgate.storage.database import Database
from tests.engines.world import ALICE, GATED, Bank, approvals, make_agent, pending
from tests.engines.world import services as world_services
from tests.telemetry.conftest import Otel

__all__ = ["approvals"]

FLAKY = {"name": "tests.hookfixtures:MisbehavingPre",
         "params": {"how": "raise", "fail_mode": "open"}}
NO_NOTES = {"name": "tests.hookfixtures:BlockTool",
            "params": {"tool": "db__write_note", "error": "Blocked: notes are closed today."}}


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def assert_has(span: ReadableSpan, expected: dict[str, Any]) -> None:
    got = attrs(span)
    wrong = {k: (got.get(k), v) for k, v in expected.items() if got.get(k) != v}
    assert not wrong, f"{span.name}: (got, expected) {wrong}"


def parent_of(otel: Otel, span: ReadableSpan) -> ReadableSpan:
    assert span.parent is not None, f"{span.name} has no parent"
    return next(s for s in otel.spans()
                if s.context is not None and s.context.span_id == span.parent.span_id)


async def run_purchasing_world(db: Database, approvals: PersistentApprovals) -> Any:
    bank = Bank()
    buyer = make_agent(bank, "buyer", NO_NOTES, FLAKY, delegates=["scout"])
    quote = next(t for t in bank.tools() if t.name == "oa__quote")
    scout = Agent(id="scout", name="Scout", instructions="Find prices.", tools=[quote],
                  org_id="acme", owner_user_id="olivia")
    models = {
        "buyer": ScriptedLLM([
            {"tool_calls": [
                {"name": "db__write_note", "args": {"text": "bought"}, "id": "c_note"},
                {"name": "oa__purchase_pay", "args": {"amount": GATED, "vendor": "ACME"},
                 "id": "c_pay"},
            ]},
            {"tool_calls": [{"name": "call_agent", "id": "c_ask",
                             "args": {"agent_id": "scout", "message": "price of ACME?"}}]},
            {"answer": "paid, and ACME quotes 1200"},
        ]),
        "scout": ScriptedLLM([
            {"tool_calls": [{"name": "oa__quote", "args": {"vendor": "ACME"}, "id": "c_q"}]},
            {"answer": "1200"},
        ]),
    }
    engine = DelegatingReActEngine(
        models["buyer"], delegation=Delegation({"buyer": buyer, "scout": scout},
                                               lambda agent_id: models[agent_id]),
        **world_services(db, approvals))
    run = asyncio.create_task(engine.run(buyer, "buy from ACME", user_id="alice",
                                         org_id="acme", conversation_id="conv-1"))
    (request,) = await pending(approvals)
    await asyncio.sleep(0.05)  # the person takes a moment
    await approvals.decide(request.id, "approve", ALICE)
    result = await asyncio.wait_for(run, 20)
    assert result.status == "completed", result
    assert bank.payments == [{"amount": GATED, "vendor": "ACME"}] and bank.notes == []
    return request


async def test_a_run_is_one_trace_of_agent_tool_hook_and_approval_spans(
        otel: Otel, db: Database, approvals: PersistentApprovals) -> None:
    request = await run_purchasing_world(db, approvals)

    root = otel.one("invoke_agent Buyer")
    assert root.parent is None and root.kind is SpanKind.INTERNAL
    assert_has(root, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "buyer",
        "gen_ai.agent.name": "Buyer", "gen_ai.conversation.id": "conv-1",
        "gen_ai.provider.name": "hookgate.scripted", "hookgate.run.status": "completed",
        "hookgate.execution_path": "react", "hookgate.org.id": "acme",
    })
    assert {s.context.trace_id for s in otel.spans() if s.context} == {root.context.trace_id}

    # The model calls: three turns of the buyer, two of the scout, each a CLIENT span.
    chats = otel.named("chat hookgate.scripted")
    assert len(chats) == 5 and all(s.kind is SpanKind.CLIENT for s in chats)
    assert sum(1 for s in chats if parent_of(otel, s) is root) == 3
    assert attrs(chats[0])["gen_ai.operation.name"] == "chat"

    # The blocked call: its span says which hook blocked it; the hook's span says why.
    note = otel.one("execute_tool db__write_note")
    assert parent_of(otel, note) is root
    assert_has(note, {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "db__write_note",
        "gen_ai.tool.call.id": "c_note", "gen_ai.tool.type": "function",
        "hookgate.tool.outcome": "blocked", "hookgate.tool.blocked_by": "block_tool",
        "error.type": "blocked",
    })
    assert note.status.status_code is StatusCode.ERROR
    (guard,) = otel.children(note)
    assert guard.name == "hookgate.hook block_tool"
    assert_has(guard, {"hookgate.hook.name": "block_tool",
                       "hookgate.hook.point": "PreToolUse",
                       "hookgate.hook.outcome": "blocked"})
    assert attrs(guard)["hookgate.hook.reason"] == "Blocked: notes are closed today."

    # The approved call: the failed (open) hook, then the gate, which waited for alice.
    pay = otel.one("execute_tool oa__purchase_pay")
    assert attrs(pay)["hookgate.tool.outcome"] == "ok" and "error.type" not in attrs(pay)
    assert pay.status.status_code is not StatusCode.ERROR
    hooks = {s.name: s for s in otel.children(pay)}
    assert set(hooks) == {"hookgate.hook misbehaving_pre", "hookgate.hook approval_gate"}
    flaky = hooks["hookgate.hook misbehaving_pre"]
    assert_has(flaky, {"hookgate.hook.outcome": "failed",
                       "hookgate.hook.fail_mode": "open",
                       "error.type": "RuntimeError"})
    assert flaky.status.status_code is StatusCode.ERROR
    assert any(e.name == "exception" for e in flaky.events)
    gate = hooks["hookgate.hook approval_gate"]
    assert attrs(gate)["hookgate.hook.outcome"] == "ok"
    (wait,) = otel.children(gate)
    assert wait.name == "hookgate.approval.wait"
    assert_has(wait, {
        "hookgate.approval.request_id": request.id, "hookgate.approval.outcome": "approved",
        "hookgate.approval.decided_by": "alice", "hookgate.approval.mode": "inline",
        "gen_ai.tool.call.id": "c_pay",
    })
    assert attrs(wait)["hookgate.approval.wait_s"] >= 0.04
    assert wait.end_time - wait.start_time >= 40_000_000  # ns: the wait is the span

    # The delegated child: its own invoke_agent span inside the call_agent tool span.
    ask = otel.one("execute_tool call_agent")
    assert parent_of(otel, ask) is root
    child = otel.one("invoke_agent Scout")
    assert parent_of(otel, child) is ask
    assert_has(child, {"gen_ai.agent.id": "scout",
                       "hookgate.execution_path": "delegate",
                       "hookgate.delegation.parent_agent_id": "buyer",
                       "hookgate.delegation.depth": 1,
                       "hookgate.run.status": "completed"})
    assert attrs(child)["hookgate.run.id"] != attrs(root)["hookgate.run.id"]
    assert parent_of(otel, otel.one("execute_tool oa__quote")) is child

    # Metrics: calls by outcome and blocking hook, hook latency, approvals.
    calls = {(p.attributes["gen_ai.tool.name"], p.attributes["hookgate.tool.outcome"],
              p.attributes.get("hookgate.tool.blocked_by")): p.value
             for p in otel.points("hookgate.tool.calls")}
    assert calls == {("db__write_note", "blocked", "block_tool"): 1,
                     ("oa__purchase_pay", "ok", None): 1, ("call_agent", "ok", None): 1,
                     ("oa__quote", "ok", None): 1}
    failed = [p for p in otel.points("hookgate.hook.duration")
              if p.attributes["hookgate.hook.outcome"] == "failed"]
    assert [p.attributes["hookgate.hook.name"] for p in failed] == ["misbehaving_pre"]
    assert failed[0].count == 2  # the pay call and the call_agent call
    assert [p.value for p in otel.points("hookgate.approval.pending")] == [0]
    (waited,) = otel.points("hookgate.approval.wait.duration")
    assert waited.count == 1 and waited.attributes["hookgate.approval.outcome"] == "approved"
    assert otel.points("gen_ai.client.operation.duration")


async def test_a_rejected_call_ends_the_wait_span_with_the_decision(
        otel: Otel, db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    buyer = make_agent(bank, "buyer")
    llm = ScriptedLLM([{"tool_calls": [{"name": "oa__purchase_pay", "id": "c_pay",
                                        "args": {"amount": GATED, "vendor": "ACME"}}]},
                       {"answer": "not paid"}])
    engine = DelegatingReActEngine(llm, **world_services(db, approvals))
    run = asyncio.create_task(engine.run(buyer, "pay", user_id="alice", org_id="acme"))
    (request,) = await pending(approvals)
    await approvals.decide(request.id, "reject", ALICE, reason="too much")
    await asyncio.wait_for(run, 20)

    wait = otel.one("hookgate.approval.wait")
    assert_has(wait, {"hookgate.approval.outcome": "rejected",
                      "hookgate.approval.decided_by": "alice",
                      "error.type": "rejected"})
    assert wait.status.description == "too much"
    pay = otel.one("execute_tool oa__purchase_pay")
    assert attrs(pay)["hookgate.tool.blocked_by"] == "approval_gate"
    assert bank.payments == []
