"""The ReAct engine (SPEC §3): the model picks tools, each call takes the guarded path with
its own hook chain, the calls of one turn run together, and the run ends visibly."""

from __future__ import annotations

import asyncio
from typing import Any

from hookgate import HookServices, ReActEngine, ScriptedLLM, tool
from tests.hookfixtures import agent_with, pay_tool


def call(name: str, args: dict[str, Any], id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": id}


async def test_a_scripted_list_plays_its_turns_to_the_answer() -> None:
    runs: list[dict[str, Any]] = []
    llm = ScriptedLLM([
        {"tool_calls": [call("oa__purchase_pay", {"amount": 10, "vendor": "ACME"}, "c1")]},
        {"answer": "Paid ACME 10."},
    ])

    result = await ReActEngine(llm).run(agent_with([pay_tool(runs)]), "pay ACME 10",
                                        user_id="alice")

    assert result.status == "completed"
    assert result.answer == "Paid ACME 10."
    assert runs == [{"amount": 10, "vendor": "ACME"}]
    assert [e["type"] for e in result.trace] == [
        "session_start", "model_turn", "tool_call", "tool_result", "answer", "done"]


async def test_a_scripted_callable_sees_the_session_start_context_in_the_system_message(
) -> None:
    shown: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        shown.append(messages)
        return {"answer": "hello"}

    agent = agent_with([], {"name": "tests.hookfixtures:AddContext",
                            "params": {"text": "The org is read-only today."}})

    result = await ReActEngine(ScriptedLLM(model)).run(agent, "hi", user_id="alice")

    assert result.status == "completed"
    [messages] = shown
    assert messages[0]["role"] == "system"
    assert messages[0]["content"] == (
        "You buy what the user asks for.\n\nThe org is read-only today.")
    assert messages[1] == {"role": "user", "content": "hi"}


async def test_several_tool_calls_in_one_turn_each_pass_their_own_chain() -> None:
    runs: list[dict[str, Any]] = []
    looked_up: list[str] = []

    @tool
    async def crm__lookup(vendor: str) -> str:
        looked_up.append(vendor)
        return f"{vendor}: ok"

    services = HookServices(extra={"journal": []})
    agent = agent_with(
        [pay_tool(runs), crm__lookup],
        "tests.hookfixtures:RecordCall",
        {"name": "tests.hookfixtures:BlockTool",
         "params": {"tool": "oa__purchase_pay", "error": "payments are frozen"}},
    )
    llm = ScriptedLLM([
        {"tool_calls": [
            call("crm__lookup", {"vendor": "ACME"}, "a"),
            call("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}, "b"),
            call("crm__lookup", {"vendor": "Initech"}, "c"),
        ]},
        {"answer": "done"},
    ])

    result = await ReActEngine(llm, services=services).run(agent, "go", user_id="alice")

    recorded = sorted((m["tool_call_id"], name, args)
                      for _, name, args, m in services.extra["journal"])
    assert recorded == [
        ("a", "crm__lookup", {"vendor": "ACME"}),
        ("b", "oa__purchase_pay", {"amount": 5, "vendor": "ACME"}),
        ("c", "crm__lookup", {"vendor": "Initech"}),
    ]
    outcomes = {e["tool_call_id"]: e for e in result.tool_events()}
    assert outcomes["b"]["allowed"] is False
    assert outcomes["b"]["observation"] == "payments are frozen"
    assert outcomes["a"]["allowed"] and outcomes["c"]["allowed"]
    assert runs == []
    assert sorted(looked_up) == ["ACME", "Initech"]


async def test_the_tool_calls_of_one_turn_run_concurrently() -> None:
    # Each tool waits for the other to have started: run one after the other, the first
    # would wait in vain and time out.
    left_started, right_started = asyncio.Event(), asyncio.Event()

    @tool
    async def left() -> str:
        left_started.set()
        await asyncio.wait_for(right_started.wait(), timeout=5)
        return "left done"

    @tool
    async def right() -> str:
        right_started.set()
        await asyncio.wait_for(left_started.wait(), timeout=5)
        return "right done"

    llm = ScriptedLLM([
        {"tool_calls": [call("left", {}, "l"), call("right", {}, "r")]},
        {"answer": "both"},
    ])

    result = await ReActEngine(llm).run(agent_with([left, right]), "go", user_id="alice")

    assert [(e["tool_call_id"], e["status"], e["observation"]) for e in result.tool_events()
            ] in ([("l", "ok", "left done"), ("r", "ok", "right done")],
                  [("r", "ok", "right done"), ("l", "ok", "left done")])
    assert result.status == "completed"


async def test_stream_yields_the_same_events_as_the_runs_trace_in_the_same_order() -> None:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [call("oa__purchase_pay", {"amount": 1, "vendor": "ACME"}, "c1"),
                        call("oa__purchase_pay", {"amount": 2, "vendor": "ACME"}, "c2")]},
        {"tool_calls": [call("oa__nope", {}, "c3")]},
        {"answer": "done"},
    ]
    agent = agent_with([pay_tool([])], "tests.hookfixtures:RecordCall")

    ran = await ReActEngine(ScriptedLLM(turns), services=HookServices()).run(
        agent, "go", user_id="alice", run_id="run_same")
    streamed = [e async for e in ReActEngine(ScriptedLLM(turns), services=HookServices())
                .stream(agent, "go", user_id="alice", run_id="run_same")]

    assert [e.to_dict() for e in streamed] == ran.trace
    assert [e.seq for e in streamed] == list(range(1, len(ran.trace) + 1))
    assert streamed[-1].type == "done"


async def test_the_step_limit_ends_the_run_with_max_steps() -> None:
    runs: list[dict[str, Any]] = []

    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        n = sum(1 for m in messages if m["role"] == "assistant")
        return {"tool_calls": [call("oa__purchase_pay", {"amount": n, "vendor": "A"}, f"c{n}")]}

    result = await ReActEngine(ScriptedLLM(model), max_steps=3).run(
        agent_with([pay_tool(runs)]), "loop", user_id="alice")

    assert result.status == "max_steps"
    assert result.answer is None
    assert result.error == "the run stopped after 3 model turns without an answer"
    assert len(runs) == 3
    assert result.trace[-1] == {"type": "done", "seq": len(result.trace),
                                "status": "max_steps", "answer": None}


async def test_a_model_error_fails_the_run_and_says_why() -> None:
    runs: list[dict[str, Any]] = []
    llm = ScriptedLLM([
        {"tool_calls": [call("oa__purchase_pay", {"amount": 1, "vendor": "A"}, "c1")]},
    ])

    result = await ReActEngine(llm).run(agent_with([pay_tool(runs)]), "go", user_id="alice")

    assert result.status == "failed"
    assert result.error == (
        "model error: the script has 1 turns and the run asked for turn 2")
    assert len(runs) == 1
    assert [e["type"] for e in result.trace][-2:] == ["error", "done"]


async def test_tool_events_in_the_trace_carry_what_the_hooks_decided() -> None:
    runs: list[dict[str, Any]] = []

    @tool
    async def crm__lookup(vendor: str) -> str:
        return f"{vendor}: ok"

    agent = agent_with(
        [pay_tool(runs), crm__lookup],
        {"name": "tests.hookfixtures:RecordCall", "params": {"side_effect": "audit row"}},
        {"name": "tests.hookfixtures:BlockTool",
         "params": {"tool": "oa__purchase_pay", "error": "payments are frozen"}},
    )
    llm = ScriptedLLM([
        {"tool_calls": [call("crm__lookup", {"vendor": "ACME"}, "a")]},
        {"tool_calls": [call("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}, "b")]},
        {"answer": "done"},
    ])

    result = await ReActEngine(llm, services=HookServices()).run(agent, "go", user_id="alice")

    allowed, blocked = result.tool_events()
    assert allowed["type"] == "tool_result"
    assert {k: allowed[k] for k in ("tool_name", "args", "allowed", "error", "observation")
            } == {"tool_name": "crm__lookup", "args": {"vendor": "ACME"}, "allowed": True,
                  "error": None, "observation": "ACME: ok"}
    assert allowed["side_effects"] == ["record_call: audit row"]
    assert blocked["type"] == "tool_blocked"
    assert {k: blocked[k] for k in ("tool_name", "args", "allowed", "error", "observation")
            } == {"tool_name": "oa__purchase_pay", "args": {"amount": 5, "vendor": "ACME"},
                  "allowed": False, "error": "payments are frozen",
                  "observation": "payments are frozen"}
    assert blocked["blocked_by"] == "block_tool"
    assert blocked["side_effects"] == ["record_call: audit row"]
    assert [(h["hook"], h["kind"]) for h in blocked["hooks"]] == [
        ("record_call", "side_effect"), ("block_tool", "blocked")]
