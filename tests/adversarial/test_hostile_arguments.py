"""Arguments that defeat predicates or stores, on every path, over real databases: NaN and
±Infinity (as numbers, as the strings a float parameter would coerce, as ``1e400`` in an
OpenAI-style argument string), 300-deep nesting, lone surrogates, integers a browser
would round, and call ids longer than the column. None reaches a tool, no request is made
for a value that is not what would run, and every run ends (none is left "running")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hookgate import DAGEngine, ReActEngine, ScriptedLLM, tool
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.engines import DelegatingReActEngine, Delegation
from hookgate.llm import OpenAICompatibleModel
from hookgate.storage.database import Database
from hookgate.storage.runs import DatabaseRunStore
from hookgate.workflows import WorkflowRunner, parse_workflow
from hookgate.workflows.schema import WorkflowError
from tests.adversarial.conftest import Tally
from tests.engines.world import Bank, events, make_agent, services
from tests.fakes.chat_completions import FakeChatCompletions, tool_call

pytestmark = pytest.mark.both_databases


def deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"d": value}
    return value


#: Argument objects for the payment tool that must never run it (name → args).
HOSTILE: dict[str, dict[str, Any]] = {
    "NaN amount": {"amount": float("nan"), "vendor": "ACME"},
    "Infinity amount": {"amount": float("inf"), "vendor": "ACME"},
    "-Infinity amount": {"amount": float("-inf"), "vendor": "ACME"},
    "'NaN' string amount": {"amount": "NaN", "vendor": "ACME"},
    "'Infinity' string amount": {"amount": "Infinity", "vendor": "ACME"},
    "'-inf' string amount": {"amount": "-inf", "vendor": "ACME"},
    "'1e400' string amount": {"amount": "1e400", "vendor": "ACME"},
    "lone surrogate vendor": {"amount": 10, "vendor": "ACME\ud83d"},
    "300-deep vendor": {"amount": 10, "vendor": deep(300)},
    "unsafe integer amount": {"amount": 2**53 + 1, "vendor": "ACME"},
}

#: Raw argument strings as an OpenAI-compatible endpoint sends them.
HOSTILE_TEXT: dict[str, str] = {
    "NaN literal": '{"amount": NaN, "vendor": "ACME"}',
    "Infinity literal": '{"amount": Infinity, "vendor": "ACME"}',
    "-Infinity literal": '{"amount": -Infinity, "vendor": "ACME"}',
    "1e400 overflow": '{"amount": 1e400, "vendor": "ACME"}',
    "-1e400 overflow": '{"amount": -1e400, "vendor": "ACME"}',
    "lone surrogate escape": '{"amount": 10, "vendor": "\\ud83d"}',
    "300-deep text": '{"amount": 10, "vendor": ' + '{"d": ' * 300 + "1" + "}" * 301,
    "100000-deep text": '{"amount": 10, "vendor": ' + "[" * 100_000,
}


async def stored_status(db: Database, run_id: str) -> str:
    row = await DatabaseRunStore(db).row(run_id)
    assert row is not None
    return row.status


async def stored_messages(db: Database, run_id: str) -> list[dict[str, Any]]:
    state = await DatabaseRunStore(db).load(run_id)
    assert state is not None
    return state.messages


@pytest.mark.parametrize("name", list(HOSTILE))
async def test_react_refuses_hostile_arguments_and_the_run_ends(
        name: str, db: Database, approvals: PersistentApprovals, attempt: Tally) -> None:
    bank = Bank()
    llm = ScriptedLLM([{"tool_calls": [{"id": "pay", "name": "oa__purchase_pay",
                                        "args": HOSTILE[name]}]},
                       {"answer": "gave up"}])
    engine = ReActEngine(llm, store=DatabaseRunStore(db), **services(db, approvals))
    result = await engine.run(make_agent(bank), "pay", user_id="alice")
    attempt.record(f"ReAct: {name}", bool(bank.payments))
    assert bank.payments == []
    assert await approvals.store.list_for_org(org_id="acme") == []
    [blocked] = events(result.trace, "tool_blocked")
    assert blocked["status"] == "invalid"
    assert "refused" in blocked["observation"] or "finite" in blocked["observation"]
    # The model read why, and the run ended and was stored as ended.
    messages = await stored_messages(db, result.run_id)
    tool_message = next(m for m in messages if m["role"] == "tool")
    assert tool_message["content"] == blocked["observation"]
    assert result.status == "completed"
    assert await stored_status(db, result.run_id) == "completed"


@pytest.mark.parametrize("name", list(HOSTILE_TEXT))
async def test_openai_argument_strings_are_parsed_strictly(
        name: str, db: Database, approvals: PersistentApprovals, attempt: Tally) -> None:
    bank = Bank()

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        if any(m["role"] == "tool" for m in body["messages"]):
            return {"content": "gave up"}
        return tool_call("oa__purchase_pay", HOSTILE_TEXT[name])

    with FakeChatCompletions("k", "m", respond) as fake:
        engine = ReActEngine(OpenAICompatibleModel(fake.base_url, "k", "m"),
                             store=DatabaseRunStore(db), **services(db, approvals))
        result = await engine.run(make_agent(bank), "pay", user_id="alice")
        told = fake.requests[1].tool_messages()[0]["content"]
    attempt.record(f"OpenAI arguments: {name}", bool(bank.payments))
    assert bank.payments == []
    assert "refused" in told
    assert result.status == "completed"
    assert await stored_status(db, result.run_id) == "completed"


async def test_a_call_id_longer_than_the_column_is_hashed_and_runs_once(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    long_id = "call_" + "x" * 500
    llm = ScriptedLLM([{"tool_calls": [{"id": long_id, "name": "oa__purchase_pay",
                                        "args": {"amount": 10, "vendor": "ACME"}}]},
                       {"answer": "paid"}])
    engine = ReActEngine(llm, store=DatabaseRunStore(db), **services(db, approvals))
    result = await engine.run(make_agent(bank), "pay", user_id="alice")
    assert result.status == "completed", result.error
    assert bank.payments == [{"amount": 10.0, "vendor": "ACME"}]
    [ran] = events(result.trace, "tool_result")
    assert ran["tool_call_id"].startswith("call_") and len(ran["tool_call_id"]) <= 64
    # The assistant message and the tool message carry the same (hashed) id.
    messages = await stored_messages(db, result.run_id)
    asked = next(m for m in messages if m.get("tool_calls"))["tool_calls"][0]["id"]
    answered = next(m for m in messages if m["role"] == "tool")["tool_call_id"]
    assert asked == answered == ran["tool_call_id"]


async def test_a_dag_plan_with_non_finite_or_unstorable_args_runs_nothing(
        db: Database, approvals: PersistentApprovals, attempt: Tally) -> None:
    bank = Bank()
    for name in ("NaN amount", "Infinity amount", "lone surrogate vendor", "300-deep vendor"):
        plan = {"plan": {"steps": [
            {"id": "quote", "tool": "oa__quote", "args": {"vendor": "ACME"}},
            {"id": "pay", "tool": "oa__purchase_pay", "args": HOSTILE[name]}]}}
        engine = DAGEngine(ScriptedLLM([plan, {"answer": "x"}]), store=DatabaseRunStore(db),
                           **services(db, approvals))
        result = await engine.run(make_agent(bank), "pay", user_id="alice")
        attempt.record(f"DAG plan step: {name}", bool(bank.payments))
        assert result.status == "failed" and "plan" in (result.error or "")
        assert await stored_status(db, result.run_id) == "failed"
    for name in ("'NaN' string amount", "'1e400' string amount"):
        plan = {"plan": {"steps": [{"id": "pay", "tool": "oa__purchase_pay",
                                    "args": HOSTILE[name]}]}}
        engine = DAGEngine(ScriptedLLM([plan, {"answer": "x"}]), store=DatabaseRunStore(db),
                           **services(db, approvals))
        result = await engine.run(make_agent(bank), "pay", user_id="alice")
        attempt.record(f"DAG plan step: {name}", bool(bank.payments))
        assert result.status == "completed"
        assert events(result.trace, "tool_blocked")[0]["status"] == "invalid"
    assert bank.payments == [] and bank.quotes == 0


async def test_a_plan_written_as_text_with_nan_is_rejected(attempt: Tally) -> None:
    bank = Bank()
    text = '{"plan": {"steps": [{"id": "pay", "tool": "oa__purchase_pay", ' \
           '"args": {"amount": NaN, "vendor": "ACME"}}]}}'
    result = await DAGEngine(ScriptedLLM([{"answer": text}])).run(make_agent(bank), "pay")
    attempt.record("DAG plan text with a NaN literal", bool(bank.payments))
    assert result.status == "failed" and "NaN" in (result.error or "")
    assert bank.payments == []


async def test_a_delegate_cannot_pass_hostile_arguments(
        db: Database, approvals: PersistentApprovals, attempt: Tally) -> None:
    bank = Bank()
    buyer = make_agent(bank, "buyer", delegates=["payer"])
    buyer.tools = []
    payer = make_agent(bank, "payer")
    models = {
        "buyer": ScriptedLLM([
            {"tool_calls": [{"name": "call_agent", "args": {"agent_id": "payer",
                                                            "message": "pay \ud83d"}}]},
            {"tool_calls": [{"name": "call_agent", "args": {"agent_id": "payer",
                                                            "message": "pay ACME"}}]},
            {"answer": "done"}]),
        "payer": ScriptedLLM([{"tool_calls": [{"name": "oa__purchase_pay",
                                               "args": HOSTILE["NaN amount"]}]},
                              {"answer": "could not pay"}])}
    engine = DelegatingReActEngine(
        models["buyer"], delegation=Delegation({"buyer": buyer, "payer": payer},
                                               models.__getitem__),
        store=DatabaseRunStore(db), **services(db, approvals))
    result = await engine.run(buyer, "pay", user_id="alice", org_id="acme")
    attempt.record("delegation: NaN in the delegate's call", bool(bank.payments))
    assert bank.payments == []
    first, second = events(result.trace, "tool_blocked") + events(result.trace, "tool_result")
    assert first["status"] == "invalid" and "surrogate" in first["observation"]
    assert "could not pay" in second["observation"]
    assert await stored_status(db, result.run_id) == "completed"


async def test_a_workflow_cannot_pass_non_finite_numbers(
        db: Database, approvals: PersistentApprovals, attempt: Tally) -> None:
    bank = Bank()

    @tool
    async def db__lookup(key: str) -> str:
        """Return a stored figure (here: JSON that holds a NaN literal)."""
        return '{"amount": NaN, "vendor": "ACME"}'

    buyer = make_agent(bank)
    buyer.tools.append(db__lookup)
    for constant in ("float('nan')", "1e308 * 10"):
        # A non-finite constant is refused when the workflow is declared.
        with pytest.raises(WorkflowError, match="not a finite number"):
            parse_workflow({"id": "w", "as_agent": "buyer", "nodes": [
                {"id": "pay", "type": "tool", "tool": "oa__purchase_pay",
                 "args": {"amount": f"{{{{ {constant} }}}}", "vendor": "ACME"}}]})
    # The run's input makes them at run time: the node fails instead.
    workflow = parse_workflow({"id": "w", "as_agent": "buyer", "nodes": [
        {"id": "nan", "type": "tool", "tool": "oa__purchase_pay",
         "args": {"amount": "{{ float(input) }}", "vendor": "ACME"}},
        {"id": "inf", "type": "tool", "tool": "oa__purchase_pay",
         "args": {"amount": "{{ float('1e308') * (10 if input else 1) }}", "vendor": "ACME"}},
        {"id": "text", "type": "tool", "tool": "oa__purchase_pay",
         "args": {"amount": "NaN", "vendor": "ACME"}},
        {"id": "lookup", "type": "tool", "tool": "db__lookup", "args": {"key": "k"}},
        {"id": "relay", "type": "tool", "tool": "oa__purchase_pay",
         "args": {"amount": "{{ lookup }}", "vendor": "ACME"}}],
        "edges": [{"from": "lookup", "to": "relay"}]})
    runner = WorkflowRunner({"w": workflow}, {"buyer": buyer}, lambda _: ScriptedLLM([]),
                            store=DatabaseRunStore(db), **services(db, approvals))
    result = await runner.run("w", "nan", user_id="alice")
    attempt.record("workflow: NaN, inf and 'NaN' in tool node arguments", bool(bank.payments))
    assert bank.payments == []
    nodes = {e["node_id"]: e for e in events(result.trace, "node_result")}
    for node in ("nan", "inf", "text", "relay"):
        assert nodes[node]["status"] != "ok", node
    assert result.status == "completed"
    assert await stored_status(db, result.run_id) == "completed"
    # Nothing non-finite was stored anywhere in the run (a NaN would be a bare literal).
    row = await DatabaseRunStore(db).row(result.run_id)
    assert row is not None

    def no_constant(name: str) -> Any:
        raise AssertionError(f"the stored state holds {name}")

    json.loads(row.state_json, parse_constant=no_constant)
