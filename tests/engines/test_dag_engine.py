"""The DAG engine (SPEC §3): the model plans steps with dependencies, independent steps run
at the same time, every step's tool call passes the agent's hooks, a blocked step skips what
depends on it, and a plan that cannot run is refused before anything runs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from hookgate import DAGEngine, HookServices, RunState, ScriptedLLM, tool
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.llm.openai_compat import OpenAICompatibleModel
from hookgate.storage.database import Database
from tests.engines.world import (
    ALICE,
    GATED,
    READ_ONLY,
    Bank,
    approvals,
    events,
    make_agent,
    pending,
    services,
)
from tests.fakes.chat_completions import FakeChatCompletions

__all__ = ["approvals"]


def step(id: str, tool: str | None = None, args: dict[str, Any] | None = None,
         question: str | None = None, depends_on: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": id, "depends_on": depends_on or []}
    if tool is not None:
        out["tool"] = tool
        out["args"] = args or {}
    if question is not None:
        out["question"] = question
    return out


def plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"plan": {"steps": list(steps)}}


def pay(amount: float, vendor: str = "ACME") -> dict[str, Any]:
    return {"amount": amount, "vendor": vendor}


async def test_independent_steps_run_at_the_same_time_and_the_model_answers_from_results(
) -> None:
    started: list[str] = []
    both_started = asyncio.Event()

    @tool
    async def warehouse__count(site: str) -> int:
        """Count stock at a site."""
        started.append(site)
        if len(started) == 2:
            both_started.set()
        # Finishes only once the other step has started too: a sequential engine times out.
        await asyncio.wait_for(both_started.wait(), 5)
        return {"north": 3, "south": 4}[site]

    seen: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(messages)
        if len(seen) == 1:
            return plan(step("n", "warehouse__count", {"site": "north"}),
                        step("s", "warehouse__count", {"site": "south"}),
                        step("total", question="How many in all?", depends_on=["n", "s"]))
        if len(seen) == 2:
            return {"answer": "7"}
        return {"answer": "There are 7 in stock."}

    bank = Bank()
    agent = make_agent(bank)
    agent.tools.append(warehouse__count)
    result = await DAGEngine(ScriptedLLM(model)).run(agent, "how many?", user_id="alice")

    assert result.status == "completed", result.error
    assert result.answer == "There are 7 in stock."
    assert sorted(started) == ["north", "south"]
    question = seen[1][-1]["content"]
    assert "How many in all?" in question and "- n: 3" in question and "- s: 4" in question
    synthesis = seen[2][-1]["content"]
    assert "total (question 'How many in all?'): ok: 7" in synthesis
    assert [e["step_id"] for e in events(result.trace, "step_result")][-1] == "total"


async def test_every_step_call_passes_the_agents_hooks_on_the_dag_path() -> None:
    bank = Bank()
    journal: list[Any] = []
    agent = make_agent(bank, "buyer", {"name": "tests.hookfixtures:RecordCall"})
    llm = ScriptedLLM([plan(step("q", "oa__quote", {"vendor": "ACME"}),
                            step("p", "oa__purchase_pay", pay(100), depends_on=["q"])),
                       {"answer": "paid"}])
    engine = DAGEngine(llm, services=HookServices(extra={"journal": journal}))

    result = await engine.run(agent, "buy", user_id="alice", org_id="acme")

    assert result.status == "completed"
    assert bank.payments == [{"amount": 100.0, "vendor": "ACME"}]
    assert [(tool_name, meta["execution_path"], meta["tool_call_id"])
            for _, tool_name, _, meta in journal] == [
        ("oa__quote", "dag", "step_q"), ("oa__purchase_pay", "dag", "step_p")]
    assert all(meta["org_id"] == "acme" and meta["run_id"] == result.run_id
               for *_, meta in journal)


@pytest.mark.both_databases
async def test_concurrent_approvals_are_independent_only_the_approved_step_runs(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    llm = ScriptedLLM([
        plan(step("a", "oa__purchase_pay", pay(GATED, "ACME")),
             step("b", "oa__purchase_pay", pay(70_000, "Globex")),
             step("after_b", "db__write_note", {"text": "Globex paid"}, depends_on=["b"])),
        {"answer": "done"},
    ])
    engine = DAGEngine(llm, **services(db, approvals))
    task = asyncio.create_task(engine.run(make_agent(bank), "pay both", user_id="alice"))

    both = await pending(approvals, 2)  # both wait at once: the steps run concurrently
    by_vendor = {r.args["vendor"]: r for r in both}
    await approvals.decide(by_vendor["Globex"].id, "reject", ALICE, reason="not budgeted")
    await approvals.decide(by_vendor["ACME"].id, "approve", ALICE)
    result = await asyncio.wait_for(task, 10)

    assert result.status == "completed"
    assert bank.payments == [{"amount": float(GATED), "vendor": "ACME"}]
    assert bank.notes == []
    [skipped] = events(result.trace, "step_skipped")
    assert skipped["step_id"] == "after_b"
    assert skipped["reason"] == "step 'b' it depends on was blocked"


async def test_a_blocked_step_skips_everything_downstream_with_the_reason() -> None:
    bank = Bank()
    llm = ScriptedLLM([
        plan(step("note", "db__write_note", {"text": "x"}),
             step("pay", "oa__purchase_pay", pay(10), depends_on=["note"]),
             step("sum", question="What happened?", depends_on=["pay"]),
             step("quote", "oa__quote", {"vendor": "ACME"})),
        {"answer": "The note was blocked, so nothing was paid."},
    ])
    agent = make_agent(bank, "buyer", READ_ONLY)

    result = await DAGEngine(llm).run(agent, "go", user_id="alice")

    assert result.status == "completed"
    assert bank.notes == [] and bank.payments == [] and bank.quotes == 1
    assert [(e["step_id"], e["reason"]) for e in events(result.trace, "step_skipped")] == [
        ("pay", "step 'note' it depends on was blocked"),
        ("sum", "step 'pay' it depends on was skipped")]
    [blocked] = events(result.trace, "tool_blocked")
    assert "read-only" in blocked["observation"]


@pytest.mark.parametrize(("bad_plan", "why"), [
    (plan(step("a", "oa__purchase_pay", pay(1)), step("b", "nope__tool")),
     "step 'b' uses unknown tool 'nope__tool'"),
    (plan(step("a", "oa__quote", {"vendor": "x"}, depends_on=["b"]),
          step("b", "oa__purchase_pay", pay(1), depends_on=["a"])),
     "the steps form a cycle: a → b → a"),
    (plan(step("a", "oa__purchase_pay", pay(1), depends_on=["ghost"])),
     "step 'a' depends on unknown step 'ghost'"),
    (plan(step("a", "oa__purchase_pay", pay(1)), step("a", "oa__quote", {"vendor": "x"})),
     "step id 'a' is used twice"),
    (plan(step("a", "oa__purchase_pay", pay(1)), {"id": "b", "depends_on": []}),
     "needs exactly one of 'tool' or 'question'"),
    ({"plan": {"steps": []}}, "the plan's shape is wrong"),
])
async def test_a_plan_that_cannot_run_is_refused_and_nothing_runs(
        bad_plan: dict[str, Any], why: str) -> None:
    bank = Bank()
    result = await DAGEngine(ScriptedLLM([bad_plan])).run(make_agent(bank), "go")

    assert result.status == "failed"
    assert result.error is not None
    assert result.error.startswith("plan rejected, nothing ran: ")
    assert why in result.error
    assert bank.payments == [] and bank.quotes == 0
    assert events(result.trace, "tool_call") == []


async def test_an_openai_compatible_model_writes_its_plan_as_json_in_the_answer() -> None:
    the_plan = plan(step("q", "oa__quote", {"vendor": "ACME"}))
    replies = iter([
        {"content": "Here is my plan:\n```json\n" + json.dumps(the_plan) + "\n```"},
        {"content": "ACME charges 1200."},
    ])
    with FakeChatCompletions("k", "m", lambda body: next(replies)) as fake:
        engine = DAGEngine(OpenAICompatibleModel(fake.base_url, "k", "m"))
        result = await engine.run(make_agent(Bank()), "what does ACME charge?")

    assert result.status == "completed", result.error
    assert result.answer == "ACME charges 1200."
    first = fake.requests[0]
    assert "tools" not in first.body  # the plan turn is text, not tool calls
    assert "oa__quote" in first.messages[0]["content"]  # the tools are described to it
    assert '"amount": 1200' in fake.requests[1].messages[-1]["content"]


@pytest.mark.both_databases
async def test_a_dag_run_resumes_from_its_saved_state_after_a_restart(
        db: Database) -> None:
    bank = Bank()
    saved: list[str] = []

    class Store:
        async def save(self, state: RunState) -> None:
            saved.append(state.to_json())

    turns = [plan(step("q", "oa__quote", {"vendor": "ACME"}),
                  step("p", "oa__purchase_pay", pay(GATED), depends_on=["q"])),
             {"answer": "Paid after approval."}]
    first = PersistentApprovals(db, sweep_interval=0.2)
    await first.start()
    engine = DAGEngine(ScriptedLLM(turns), store=Store(), **services(db, first))
    task = asyncio.create_task(engine.run(make_agent(bank), "buy", user_id="alice"))
    await pending(first)
    first.begin_shutdown()  # the process stops: the request stays pending
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await first.stop()

    second = PersistentApprovals(db, sweep_interval=0.2)
    await second.start()
    try:
        async def at_gate(state: RunState, call: Any) -> tuple[str, dict[str, Any]] | None:
            request = await second.store.for_call(state.run_id, call.id)
            return None if request is None else ("approval_gate", dict(request.args))

        state = RunState.from_json(saved[-1])
        assert state.extra["dag"]["steps"]["q"]["status"] == "ok"
        engine = DAGEngine(ScriptedLLM(turns), resume_resolver=at_gate,
                           **services(db, second))
        resumed = asyncio.create_task(engine.resume(make_agent(bank), state))
        [request] = await pending(second)
        await second.decide(request.id, "approve", ALICE)
        result = await asyncio.wait_for(resumed, 10)
    finally:
        await second.stop()

    assert result.status == "completed" and result.answer == "Paid after approval."
    assert bank.quotes == 1  # the finished step did not run again
    assert bank.payments == [{"amount": float(GATED), "vendor": "ACME"}]
