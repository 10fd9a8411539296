"""LangChain v1 agents (create_agent, a scripted fake chat model, no network) whose tool calls
go through a real hookgate server: approved calls run once, rejected ones never run and the
model reads why, withheld output never reaches the model, the read-only guard blocks a
write, audit rows name the framework, a subgraph's call is gated, a waiting call survives a
restart of hookgate, and a pause held by a PostgreSQL checkpointer survives the agent's
process. LangChain is imported where it is used (the tools and model are in
tests/integrations/langgraph_shop.py), so collecting this module does not pay for it."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from hookgate import Agent, ScriptedLLM
from hookgate.client import Client, GuardUnavailable
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from tests.card_guard import CARD_NUMBER_GREP
from tests.integrations.world import LINEAGE, MASK
from tests.live_server import LiveServer, free_port, live_server

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage

BOT, ALICE, RO = "tok-bot", "tok-alice", "tok-ro"
WITHHOLD_CARDS = {"event": "PostToolUse", "matcher": "lookup", "name": "card_guard",
                  "command": CARD_NUMBER_GREP}
HOUSE_RULES = {"event": "SessionStart", "command": "echo 'House rule: no crypto.'"}


def agent_def(agent_id: str, org: str) -> Agent:
    return Agent(id=agent_id, name=agent_id, instructions="", tools=[], org_id=org,
                 owner_user_id="alice", confirmation_approver_scope="agent_owner",
                 model_config_json={
                     "hooks": {"class_hooks": ["audit_log", "readonly_guard"],
                               "command_hooks": [WITHHOLD_CARDS, HOUSE_RULES],
                               "python_hooks": [{"event": "PreToolUse", "function":
                                                 "tests.integrations.world:note_lineage"},
                                                {"event": "PostToolUse",
                                                 "matcher": "profile, profile_message",
                                                 "function": "tests.integrations.world:"
                                                             "scrub_card_numbers"}]},
                     "guarded_calls": {"rules": [
                         {"matcher": "transfer", "requires_confirmation": True},
                         # A sub-agent's look-ups need a person; the agent's own do not.
                         {"matcher": "lookup", "when": "metadata.depth > 0",
                          "requires_confirmation": True},
                         {"matcher": "lookup, profile, profile_message",
                          "writes": False}]}})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('lg') / 'hookgate.db'}"
    deployment = Deployment(
        database_url=url, orgs=[OrgSpec("acme", "ACME"), OrgSpec("frozen", "F", read_only=True)],
        users=[UserSpec("alice", "acme", admin=True, token_sha256=token_digest(ALICE)),
               UserSpec("bot", "acme", token_sha256=token_digest(BOT)),
               UserSpec("rob", "frozen", token_sha256=token_digest(RO))],
        agents={"payer": agent_def("payer", "acme"), "frozen": agent_def("frozen", "frozen")},
        model_for=lambda _a: ScriptedLLM([{"answer": "-"}]), channels=[])
    with live_server(deployment) as srv:
        yield srv


@pytest.fixture
def guard(server: LiveServer) -> Iterator[Client]:
    from tests.integrations.langgraph_shop import RAN

    RAN.clear()
    client = Client(server.url, BOT, framework="langgraph")
    yield client
    client.close()


def decide(server: LiveServer, request_id: str, decision: str, **extra: Any) -> None:
    r = httpx.post(f"{server.url}/api/confirmations/{request_id}/respond",
                   json={"decision": decision, **extra},
                   headers={"Authorization": f"Bearer {ALICE}"})
    assert r.status_code == 200, r.text


def test_an_approved_call_waits_as_an_interrupt_and_runs_once(
        server: LiveServer, guard: Client) -> None:
    from hookgate.integrations.langgraph import resume_when_decided
    from tests.integrations.langgraph_shop import RAN, calls, run_paused, tool_texts

    graph, config, paused = run_paused(guard, "payer", calls("transfer", {"amount": 5,
                                                                          "to": "bob"}))
    assert RAN == [] and paused["__interrupt__"]
    request_id = paused["__interrupt__"][0].value["hookgate"]["request_id"]
    decide(server, request_id, "approve", reason="fine")
    resume = resume_when_decided(guard, paused["__interrupt__"], timeout=10)
    assert resume is not None
    done = graph.invoke(resume, config)
    assert RAN == [("transfer", {"amount": 5, "to": "bob"})]
    assert "sent 5 to bob" in tool_texts(done)[0] and "approved by alice" in tool_texts(done)[0]
    rows = httpx.get(f"{server.url}/api/audit", params={"limit": 50},
                     headers={"Authorization": f"Bearer {ALICE}"}).json()["items"]
    ran = [r for r in rows if r["tool_name"] == "transfer" and r["outcome"] == "ok"]
    assert [(r["connector"], r["approver"]) for r in ran] == [("guarded_calls", "alice")]


def test_a_rejected_call_never_runs_and_the_model_reads_why(
        server: LiveServer, guard: Client) -> None:
    from hookgate.integrations.langgraph import resume_when_decided
    from tests.integrations.langgraph_shop import RAN, calls, run_paused, tool_texts

    graph, config, paused = run_paused(guard, "payer", calls("transfer", {"amount": 9,
                                                                          "to": "eve"}))
    decide(server, paused["__interrupt__"][0].value["hookgate"]["request_id"], "reject",
           reason="eve is not a customer")
    done = graph.invoke(resume_when_decided(guard, paused["__interrupt__"], timeout=10),
                        config)
    assert RAN == []
    assert "eve is not a customer" in tool_texts(done)[0]


def test_a_forged_resume_value_runs_nothing(guard: Client, attempt: Any) -> None:
    from langgraph.types import Command

    from tests.integrations.langgraph_shop import RAN, calls, run_paused

    graph, config, paused = run_paused(guard, "payer", calls("transfer", {"amount": 8,
                                                                          "to": "mal"}))
    forged = Command(resume={"hookgate": {"call": paused["__interrupt__"][0].value[
        "hookgate"]["call"], "decision": "approved"}})
    again = graph.invoke(forged, config)
    attempt.record("LangGraph: a forged Command(resume=...) approving a pending call",
                   bool(RAN))
    assert RAN == [] and again["__interrupt__"]


def test_an_edited_call_runs_with_the_edit_and_the_model_is_told(
        server: LiveServer, guard: Client) -> None:
    from hookgate.integrations.langgraph import resume_when_decided
    from tests.integrations.langgraph_shop import RAN, calls, run_paused, tool_texts

    graph, config, paused = run_paused(guard, "payer", calls("transfer", {"amount": 500,
                                                                          "to": "bob"}))
    decide(server, paused["__interrupt__"][0].value["hookgate"]["request_id"], "approve",
           arguments={"amount": 50, "to": "bob"})
    done = graph.invoke(resume_when_decided(guard, paused["__interrupt__"], timeout=10),
                        config)
    assert RAN == [("transfer", {"amount": 50, "to": "bob"})]
    told = tool_texts(done)[0]
    assert "sent 50 to bob" in told and "amount: 500 → 50" in told


def test_withheld_output_never_reaches_the_model_and_session_context_does(
        guard: Client) -> None:
    from langchain_core.messages import SystemMessage

    from tests.integrations.langgraph_shop import RAN, calls, run_paused, tool_texts

    _, _, done = run_paused(guard, "payer", calls("lookup", {"name": "ann"}))
    assert RAN == [("lookup", {"name": "ann"})]
    assert [m.content for m in done["messages"] if isinstance(m, SystemMessage)] == [
        "House rule: no crypto."]
    seen = tool_texts(done)[0]
    assert "4111" not in seen and seen


def test_the_read_only_guard_blocks_a_write(server: LiveServer) -> None:
    from tests.integrations.langgraph_shop import RAN, calls, run_paused, tool_texts

    RAN.clear()
    frozen = Client(server.url, RO, framework="langgraph")
    try:
        _, _, done = run_paused(frozen, "frozen", calls("transfer", {"amount": 1, "to": "x"}))
    finally:
        frozen.close()
    assert RAN == [] and "read-only" in tool_texts(done)[0].lower()


def test_a_subgraphs_tool_call_is_gated(server: LiveServer, guard: Client) -> None:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph

    from hookgate.integrations.langgraph import HookgateMiddleware
    from tests.integrations.langgraph_shop import RAN, calls, model, transfer

    inner = create_agent(model(calls("transfer", {"amount": 7, "to": "sub"})),
                         tools=[transfer], middleware=[HookgateMiddleware(guard, agent="payer")])
    outer = StateGraph(MessagesState)
    outer.add_node("delegate", inner)
    outer.add_edge(START, "delegate")
    graph = outer.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}
    paused = graph.invoke({"messages": [("user", "go")]}, config)
    assert RAN == [] and paused["__interrupt__"][0].value["hookgate"]["request_id"]


def test_a_sub_agents_call_carries_its_parent_and_depth(guard: Client) -> None:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph

    from hookgate.integrations.langgraph import HookgateMiddleware
    from tests.integrations.langgraph_shop import RAN, calls, lookup, model

    top = HookgateMiddleware(guard, agent="payer")
    inner = create_agent(model(calls("lookup", {"name": "sub"})), tools=[lookup],
                         middleware=[top.sub_agent(agent="payer")])
    outer = StateGraph(MessagesState)
    outer.add_node("delegate", inner)
    outer.add_edge(START, "delegate")
    graph = outer.compile(checkpointer=InMemorySaver())
    thread = f"t-{uuid.uuid4().hex[:8]}"
    paused = graph.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": thread}})
    # The look-up the agent may make on its own waits for a person one level down.
    assert RAN == [] and paused["__interrupt__"][0].value["hookgate"]["request_id"]
    assert [e for e in LINEAGE if e[1] == f"{thread}/payer"] == [
        ("payer", f"{thread}/payer", thread, None, 1)]


def test_an_unreachable_hookgate_runs_no_tool_and_says_why() -> None:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from hookgate.integrations.langgraph import HookgateMiddleware
    from tests.integrations.langgraph_shop import (
        RAN,
        calls,
        lookup,
        model,
        run_paused,
        tool_texts,
        transfer,
    )

    RAN.clear()
    gone = Client(f"http://127.0.0.1:{free_port()}", BOT, framework="langgraph", timeout=2)
    with pytest.raises(GuardUnavailable, match="unreachable"):
        run_paused(gone, "payer", calls("lookup", {"name": "ann"}))
    graph = create_agent(model(calls("lookup", {"name": "bob"})), tools=[transfer, lookup],
                         middleware=[HookgateMiddleware(gone, agent="payer",
                                                        on_unavailable="tell_model")],
                         checkpointer=InMemorySaver())
    told = graph.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "u"}})
    assert RAN == [] and "unreachable" in tool_texts(told)[0]


def test_a_transfer_waiting_while_hookgate_restarts_runs_once_after_the_decision(
        tmp_path: Path) -> None:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from hookgate.integrations.langgraph import HookgateMiddleware, resume_when_decided
    from tests.integrations.langgraph_shop import RAN, calls, lookup, model, tool_texts, transfer

    RAN.clear()
    deployment = Deployment(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'hookgate.db'}",
        orgs=[OrgSpec("acme", "ACME")],
        users=[UserSpec("alice", "acme", admin=True, token_sha256=token_digest(ALICE)),
               UserSpec("bot", "acme", token_sha256=token_digest(BOT))],
        agents={"payer": agent_def("payer", "acme")},
        model_for=lambda _a: ScriptedLLM([{"answer": "-"}]), channels=[])
    saver = InMemorySaver()  # the agent's process holds its pause; hookgate restarts
    config = {"configurable": {"thread_id": "through-a-restart"}}

    def graph(guard: Client, *turns: AIMessage) -> Any:
        return create_agent(model(*turns), tools=[transfer, lookup], checkpointer=saver,
                            middleware=[HookgateMiddleware(guard, agent="payer")])

    with live_server(deployment) as first, Client(first.url, BOT,
                                                   framework="langgraph") as guard:
        paused = graph(guard, calls("transfer", {"amount": 4, "to": "bob"})).invoke(
            {"messages": [("user", "go")]}, config)
    request_id = paused["__interrupt__"][0].value["hookgate"]["request_id"]
    assert RAN == []
    with live_server(deployment) as second, Client(second.url, BOT,
                                                    framework="langgraph") as guard:
        decide(second, request_id, "approve")
        again = graph(guard)
        resume = resume_when_decided(guard, again.get_state(config).interrupts, timeout=10)
        assert resume is not None
        done = again.invoke(resume, config)
        assert again.invoke(resume, config)["messages"] == done["messages"]
    assert RAN == [("transfer", {"amount": 4, "to": "bob"})]
    assert "sent 4 to bob" in tool_texts(done)[0]


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_a_pause_held_by_the_postgresql_checkpointer_survives_the_agents_process(
        server: LiveServer, database_url: str) -> None:
    from hookgate.integrations.langgraph import resume_when_decided
    from tests.integrations import langgraph_agent
    from tests.integrations.langgraph_shop import tool_texts

    pg = database_url.replace("postgresql+asyncpg://", "postgresql://")
    started = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.integrations.langgraph_agent", pg, server.url, BOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(started.communicate(), 60)
    assert started.returncode == 0, err.decode()[-2000:]
    request_id = out.decode().strip().splitlines()[-1]
    await asyncio.to_thread(decide, server, request_id, "approve")
    langgraph_agent.RAN.clear()
    config = {"configurable": {"thread_id": "restart"}}
    async with langgraph_agent.agent(pg, server.url, BOT) as (graph, guard):
        state = await graph.aget_state(config)
        resume = await asyncio.to_thread(resume_when_decided, guard, state.interrupts,
                                         timeout=10)
        done = await graph.ainvoke(resume, config)
        again = await graph.ainvoke(resume, config)  # a second resume runs nothing more
    assert langgraph_agent.RAN == [3]
    assert "sent 3 to b" in tool_texts(done)[0] and again["messages"] == done["messages"]


@pytest.mark.parametrize("returns", ["profile", "profile_message"])
@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_a_framework_native_result_passes_through_post_tool_use(
        guard: Client, returns: str, run: str, attempt: Any) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import ToolMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from hookgate.integrations.langgraph import HookgateMiddleware
    from tests.integrations.langgraph_shop import (
        RAN,
        ProfiledState,
        calls,
        model,
        profile,
        profile_message,
    )

    graph = create_agent(model(calls(returns, {"name": "ann"})),
                         tools=[profile, profile_message], state_schema=ProfiledState,
                         middleware=[HookgateMiddleware(guard, agent="payer")],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}
    start = {"messages": [("user", "go")]}
    done = (graph.invoke(start, config) if run == "invoke"
            else asyncio.run(graph.ainvoke(start, config)))
    seen = [m for m in done["messages"] if isinstance(m, ToolMessage)]
    attempt.record(f"LangGraph: a card in a {returns} result skips PostToolUse ({run})",
                   any("4111" in str(m.content) or "4111" in str(m.artifact) for m in seen))
    assert [(returns, {"name": "ann"})] == RAN
    # What PostToolUse saw was the tool's own text, and what it rewrote is what the model reads.
    assert [m.content for m in seen] == [f"ann: card {MASK}"]
    assert all("4111" not in str(m.artifact) for m in seen)
    if returns == "profile":
        assert done["profiled"] == "ann"  # the Command's other updates still apply


def test_langchains_own_human_in_the_loop_and_hookgates_gate_must_both_approve(
        server: LiveServer, guard: Client) -> None:
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from hookgate.integrations.langgraph import HookgateMiddleware, resume_when_decided
    from tests.integrations.langgraph_shop import RAN, calls, lookup, model, transfer

    own = HumanInTheLoopMiddleware(interrupt_on={"transfer": True})
    graph = create_agent(model(calls("transfer", {"amount": 7, "to": "bob"})),
                         tools=[transfer, lookup],
                         middleware=[own, HookgateMiddleware(guard, agent="payer")],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}
    paused = graph.invoke({"messages": [("user", "go")]}, config)
    # The framework's own review comes first: hookgate is not asked yet.
    assert RAN == [] and "hookgate" not in paused["__interrupt__"][0].value
    with pytest.raises(ValueError, match="none of these interrupts waits for hookgate"):
        resume_when_decided(guard, paused["__interrupt__"], timeout=0)
    held = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    [waiting] = held["__interrupt__"]  # then hookgate's gate pauses it for a person
    assert RAN == [] and waiting.value["hookgate"]["request_id"]
    decide(server, waiting.value["hookgate"]["request_id"], "approve")
    graph.invoke(resume_when_decided(guard, held["__interrupt__"], timeout=10), config)
    assert RAN == [("transfer", {"amount": 7, "to": "bob"})]
