"""No raw copy beside the masked one on the paths of agents that run elsewhere: the guarded-call
API (``/api/v1``, through the real HTTP client), the in-process guard, and Claude Code's
PostToolUse and PostToolUseFailure. A card number sits in what the tool returned or raised; a
PostToolUse hook rewrites it to ``[redacted by policy]`` (and another then "blocks" quoting
what it saw) or fails closed quoting it and everything its metadata views show. An API key and
a secret number sit in a gated call's arguments. Spans, log lines, every database row, every
response a member (the caller, or another member) can fetch and every error body are searched
for the card number; spans, hookgate's log lines and what another member sees for the secrets
in the arguments, and an approval card's readable numbers for the secret number."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from hookgate import Agent, HookContext, HookResult, PostToolUseHook, ScriptedLLM
from hookgate import tool as as_tool
from hookgate.approvals.card_text import card_numbers
from hookgate.client import Allowed, Client, Pending
from hookgate.client.local import AsyncLocalGuard
from hookgate.config.mcp_servers import AgentMcpAccess, McpServerSpec
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from tests.adversarial.conftest import Tally
from tests.adversarial.test_observability_leaks import every_row, span_texts
from tests.live_server import LiveServer, live_server
from tests.mcp_gateway.test_downstream_failures import FLAKY
from tests.sse import read_events
from tests.telemetry.conftest import Otel, otel

__all__ = ["otel"]

pytestmark = pytest.mark.both_databases

CARD = "4111 1111 1111 1111"
DIGITS = CARD.replace(" ", "")
API_KEY = "sk-live-9Qz7TtKkZ3wYdPq"
#: A secret that is a number: the readable numbers would group it ("73,556,081").
PIN = 73556081
WIRE_ARGS = {"amount": 5000, "api_key": API_KEY, "access_token": PIN}
REDACTED = "[redacted by policy]"
TOKENS = {"alice": "tok-alice", "bob": "tok-bob", "carol": "tok-carol"}
#: What each hook read through the context's metadata views (``tool_error`` and friends).
VIEWS: list[dict[str, Any]] = []


def _kind(ctx: HookContext) -> str:
    # The guarded calls' tools say which hook acts; the MCP gateway's agents do.
    if (ctx.agent_id or "").startswith("mcp_"):
        return str(ctx.agent_id).split("_")[1]
    return (ctx.tool_name or "").split("_", 1)[0]


class Redacts(PostToolUseHook):
    name = "redacts"
    priority = 1

    def should_trigger(self, ctx: HookContext) -> bool:
        return _kind(ctx) in ("redact", "block")

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(modified_result=REDACTED)


class FailsQuoting(PostToolUseHook):
    """Fails closed quoting the output, the error view and every metadata view it has."""

    name = "fails_quoting"

    def should_trigger(self, ctx: HookContext) -> bool:
        return _kind(ctx) == "fail"

    async def execute(self, ctx: HookContext) -> HookResult:
        raise ValueError(f"cannot classify {ctx.tool_result!r}; error "
                         f"{ctx.metadata.get('tool_error')!r}; views {dict(ctx.metadata)!r}")


class BlocksQuoting(PostToolUseHook):
    """Tries to block after the redaction (PostToolUse cannot block) quoting what it saw."""

    name = "blocks_quoting"

    def should_trigger(self, ctx: HookContext) -> bool:
        return _kind(ctx) == "block"

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(allow=False, error=f"refused: {ctx.tool_result}",
                          side_effects=[f"saw {ctx.tool_result}"])


class ReadsTheViews(PostToolUseHook):
    """Passes what the metadata views say on as context next to the output (str of each)."""

    name = "reads_the_views"
    priority = 2

    async def execute(self, ctx: HookContext) -> HookResult:
        views = {k: ctx.metadata.get(k)
                 for k in ("tool_error", "output_withheld", "policy_decision")}
        VIEWS.append(views)
        error = views["tool_error"]
        return HookResult(additional_context=None if error is None else f"note: {error}")


def deployment(database_url: str, flaky_log: Path) -> Deployment:
    here = __name__
    hooks = {"class_hooks": [f"{here}:Redacts", f"{here}:ReadsTheViews",
                             f"{here}:FailsQuoting", f"{here}:BlocksQuoting", "audit_log"]}

    def mcp_agent(agent_id: str) -> Agent:
        return Agent(id=agent_id, name=agent_id, instructions="", tools=[], org_id="acme",
                     owner_user_id="alice", model_config_json={"hooks": hooks})

    # The card number is what the MCP server says beyond what it was sent.
    flaky = McpServerSpec(id="flaky", command=sys.executable, args=[str(FLAKY)],
                          env={"FLAKY_LOG": str(flaky_log), "FLAKY_SUFFIX": f" card={CARD}"})
    agent = Agent(
        id="payer", name="payer", instructions="", tools=[], org_id="acme",
        owner_user_id="alice", confirmation_approver_scope="agent_owner",
        model_config_json={
            "hooks": hooks,
            "guarded_calls": {"rules": [{"matcher": "wire", "requires_confirmation": True}]},
            "claude_code": {"wait_s": 0, "rules": []},
        })
    return Deployment(
        database_url=database_url, orgs=[OrgSpec("acme", "ACME")],
        users=[UserSpec(u, "acme", admin=u == "alice", token_sha256=token_digest(t))
               for u, t in TOKENS.items()],
        agents={"payer": agent, "clerk": clerk(), **{a: mcp_agent(a) for a in MCP_AGENTS}},
        mcp_servers=[flaky], mcp_access={a: AgentMcpAccess(servers=["flaky"])
                                         for a in MCP_AGENTS},
        model_for=lambda a: ScriptedLLM(list(CLERK_TURNS) if a == "clerk"
                                        else [{"answer": "-"}]), channels=[])


def clerk() -> Agent:
    """An agent hookgate's own engine runs, whose model passes an API key to a tool."""

    @as_tool
    async def crm__lookup(customer: str, api_key: str) -> str:
        """Look the customer up."""
        return f"{customer}: gold"

    return Agent(id="clerk", name="clerk", instructions="", tools=[crm__lookup],
                 org_id="acme", model_config_json={"hooks": {"class_hooks": ["audit_log"]}})


CLERK_TURNS = [{"tool_calls": [{"id": "k1", "name": "crm__lookup", "args": {
    "customer": "Globex", "api_key": API_KEY}}]}, {"answer": "Globex is gold"}]


def an_engine_run(srv: LiveServer) -> str:
    """Bob runs the clerk to its end; its id."""
    r = httpx.post(f"{srv.url}/api/runs", json={"agent_id": "clerk", "message": "Globex?"},
                   headers=auth("bob"))
    assert r.status_code == 200, r.text
    run_id = str(r.json()["run_id"])
    for _ in range(600):
        if httpx.get(f"{srv.url}/api/runs/{run_id}", headers=auth("bob")).json()[
                "status"] not in ("running", "awaiting_approval"):
            return run_id
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish")


#: The MCP gateway's agents: one redacts every result, one fails closed quoting it.
MCP_AGENTS = ("mcp_redact", "mcp_fail")


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


def card_in(value: Any) -> bool:
    text = value if isinstance(value, str) else json.dumps(value, default=str,
                                                           ensure_ascii=False)
    return DIGITS in text.replace(" ", "").replace("-", "")


def key_in(value: Any) -> bool:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return API_KEY in text or str(PIN) in text.replace(",", "")


#: Each reported call: its tool (the prefix says which hook acts) and what the tool did.
REPORTS = [("redact_lookup", {"output": f"Globex pays with card={CARD}"}),
           ("redact_charge", {"error": f"cannot charge Globex: card={CARD} declined"}),
           ("fail_lookup", {"output": {"customer": "Globex", "card": CARD}}),
           ("fail_charge", {"error": f"cannot charge Globex: card={CARD} declined"}),
           ("block_lookup", {"output": f"Globex pays with card={CARD}"}),
           ("block_charge", {"error": f"cannot charge Globex: card={CARD} declined"})]


def through_the_api(srv: LiveServer, seen: list[Any]) -> str:
    """Bob's agent asks about and reports each call over HTTP; the gated call's id."""
    with Client(srv.url, TOKENS["bob"], framework="langgraph") as guard:
        guard.start_session(agent="payer", session_id="s-api")
        for n, (tool, did) in enumerate(REPORTS):
            verdict = guard.before_call(agent="payer", session_id="s-api", call_id=f"c{n}",
                                        tool=tool, arguments={"customer": "Globex"})
            assert isinstance(verdict, Allowed), verdict
            observed = guard.report(verdict.call, **did)
            seen.append([tool, observed.text, observed.withheld])
            # Reported again (an answer that never reached the client): the same text.
            seen.append(guard.report(verdict.call, **did).text)
            state = httpx.get(f"{srv.url}/api/v1/calls/{verdict.call}",
                              params={"peek": "true"}, headers=auth("bob"))
            seen.append([state.status_code, state.text])
            if tool.endswith("_lookup") and not tool.startswith("fail"):
                assert observed.text == REDACTED and not observed.withheld
            assert observed.withheld == tool.startswith("fail"), observed
        gated = guard.before_call(agent="payer", session_id="s-api", call_id="w1",
                                  tool="wire", arguments=WIRE_ARGS)
        assert isinstance(gated, Pending), gated
        with httpx.stream("GET", f"{srv.url}/api/v1/calls/{gated.call}/events",
                          headers=auth("bob"), timeout=30) as resp:
            # The stream's first event (pending): it ends only once a person decides.
            seen.append(next(ev.data for ev in read_events(resp) if ev.data))
        return gated.call


async def in_process(srv: LiveServer, seen: list[Any]) -> None:
    guard = AsyncLocalGuard(srv.runtime, framework="crewai", user="bob")
    for n, (tool, did) in enumerate(REPORTS):
        verdict = await guard.before_call(agent="payer", session_id="s-local",
                                          call_id=f"l{n}", tool=tool,
                                          arguments={"customer": "Globex"})
        assert isinstance(verdict, Allowed), verdict
        observed = await guard.report(verdict.call, **did)
        seen.append([tool, observed.text, observed.withheld])


def claude_code_body(tool: str, did: dict[str, Any], n: int) -> dict[str, Any]:
    body = {"session_id": "5f0c2a8e-1111-4222-8333-944455556666", "cwd": "/work/project",
            "permission_mode": "default", "tool_name": tool,
            "tool_input": {"customer": "Globex"}, "tool_use_id": f"toolu_{n}",
            "transcript_path": "/tmp/t.jsonl"}
    if "error" in did:
        return {**body, "hook_event_name": "PostToolUseFailure", "error": did["error"]}
    return {**body, "hook_event_name": "PostToolUse", "tool_response": did["output"]}


def from_claude_code(srv: LiveServer, seen: list[Any]) -> None:
    for n, (tool, did) in enumerate(REPORTS):
        r = httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": "payer"},
                       headers=auth("bob"), json=claude_code_body(tool, did, n), timeout=30)
        assert r.status_code == 200, r.text
        seen.append([tool, r.json()])
        if tool.startswith("fail"):
            assert r.json().get("continue") is False, r.text


async def through_the_mcp_gateway(srv: LiveServer, seen: list[Any]) -> None:
    """Bob calls the MCP server's tools through the gateway with the official client."""
    for agent in MCP_AGENTS:
        http = httpx2.AsyncClient(headers=auth("bob"), timeout=30)
        async with McpClient(streamable_http_client(f"{srv.url}/mcp/{agent}",
                                                    http_client=http)) as client:
            for name, args in (("mcp__flaky__echo", {"text": "Globex pays with"}),
                               ("mcp__flaky__fails", {})):
                result = await client.call_tool(name, args)
                seen.append([agent, name, result.model_dump(mode="json", by_alias=True)])
                assert result.is_error == (agent == "mcp_fail" or name.endswith("fails")), (
                    seen[-1])


def what_members_fetch(srv: LiveServer, gated: str, run_id: str) -> list[Any]:
    """Every list a member can read, as bob (the caller) and carol (another member), and the
    error bodies of asking about and reporting calls that are not theirs or not allowed."""
    seen: list[Any] = []
    for user in ("bob", "carol"):
        for path in ("/api/audit", "/api/confirmations", "/api/runs",
                     f"/api/v1/calls/{gated}", f"/api/runs/{run_id}"):
            r = httpx.get(f"{srv.url}{path}", headers=auth(user))
            seen.append([user, path, r.status_code, r.text])
        with httpx.stream("GET", f"{srv.url}/api/runs/{run_id}/events", headers=auth(user),
                          timeout=30) as resp:
            seen.append([user, "events", [ev.data for ev in read_events(resp) if ev.data]])
    refused = [
        httpx.post(f"{srv.url}/api/v1/calls/{gated}/result", headers=auth("bob"),
                   json={"error": f"card={CARD}"}),
        httpx.post(f"{srv.url}/api/v1/calls/{gated}/result", headers=auth("carol"),
                   json={"output": f"card={CARD}"}),
        httpx.post(f"{srv.url}/api/v1/calls/gc_nothing/result", headers=auth("bob"),
                   json={"output": f"card={CARD}"}),
        httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": "payer"},
                   headers=auth("bob"), json={"hook_event_name": "PostToolUse",
                                              "tool_response": f"card={CARD}"}),
    ]
    assert all(400 <= r.status_code < 500 for r in refused), [r.text for r in refused]
    seen += [[r.status_code, r.text] for r in refused]
    return seen


@pytest.fixture
def server_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)
    yield caplog


def test_what_a_guarded_call_returned_or_raised_stays_behind_its_masked_value(
        database_url: str, tmp_path: Path, otel: Otel, server_logs: pytest.LogCaptureFixture,
        attempt: Tally) -> None:
    VIEWS.clear()
    api: list[Any] = []
    local: list[Any] = []
    claude: list[Any] = []
    mcp: list[Any] = []
    with live_server(deployment(database_url, tmp_path / "flaky.jsonl")) as srv:
        gated = through_the_api(srv, api)
        srv.call(in_process(srv, local))
        asyncio.run(through_the_mcp_gateway(srv, mcp))
        from_claude_code(srv, claude)
        run_id = an_engine_run(srv)
        members = what_members_fetch(srv, gated, run_id)
        admin_trace = httpx.get(f"{srv.url}/api/runs/{run_id}", headers=auth("alice")).text
        admin = httpx.get(f"{srv.url}/api/audit", params={"limit": 200},
                          headers=auth("alice")).json()["items"]
    rows = asyncio.run(every_row(database_url))

    card_sinks = {
        "guarded-call API answers (report, report again, call state, event stream)": api,
        "in-process guard answers": local,
        "Claude Code PostToolUse answers": claude,
        "MCP gateway results": mcp,
        "what members fetch and the error bodies they get": members,
        "metadata views as a hook reads them": [repr(v) for v in VIEWS],
        "spans and metrics": span_texts(otel),
        "server log lines": [server_logs.text],
        "database rows (ledger, audit rows, approval requests)": rows,
    }
    for sink, texts in card_sinks.items():
        got_through = card_in(texts)
        attempt.record(f"guarded calls: the card number in {sink}", got_through)
        assert not got_through, (sink, [t for t in texts if key_in(t) or card_in(t)])
    # The arguments are stored as asked (a person approves those exact ones), so a database
    # driver's own DEBUG trace of its statements holds them; hookgate's and the server's lines
    # must not.
    ours = [r.getMessage() for r in server_logs.records
            if r.name.startswith(("hookgate", "uvicorn"))]
    key_sinks = {"spans and metrics": span_texts(otel), "hookgate's and the server's log "
                 "lines": ours, "what another member fetches and the error bodies": members[6:]}
    for sink, texts in key_sinks.items():
        got_through = key_in(texts)
        attempt.record(f"guarded calls: a gated call's API key in {sink}", got_through)
        assert not got_through, (sink, [t for t in texts if key_in(t) or card_in(t)])

    # The requester and the admins read the exact arguments; another member reads them as
    # the cards show them.
    [(mine, path)] = [(m[3], m[1]) for m in members[:6] if m[1] == "/api/confirmations"]
    [asked] = json.loads(mine)
    assert asked["payload"]["args"] == WIRE_ARGS, path
    [theirs] = [json.loads(m[3]) for m in members[6:12] if m[1] == "/api/confirmations"]
    assert theirs[0]["payload"]["args"] == {"amount": 5000, "api_key": "••••",
                                            "access_token": "••••"}
    assert theirs[0]["context"]["numbers"] == [{"path": "amount", "text": "5,000"}]

    # A run's trace: the admins read the exact arguments, members as the cards show them.
    assert key_in(admin_trace)
    [member_trace] = [m[3] for m in members[6:] if m[1] == f"/api/runs/{run_id}"]
    assert '"api_key":"••••"' in member_trace and '"customer":"Globex"' in member_trace

    # Each path ran the hooks: every kind of report reached audit, on all three paths.
    outcomes = [(r["tool_name"], r["outcome"]) for r in admin
                if r["tool_name"] not in ("wire", "crm__lookup")]
    assert len(outcomes) == 3 * len(REPORTS) + 2 * 2, outcomes
    assert {o for _t, o in outcomes} == {"ok", "error", "withheld"}
    # The hooks read the error through its view, as the fixed words.
    errors = [str(v["tool_error"]) for v in VIEWS if v["tool_error"] is not None]
    assert len(errors) == 3 * 3 + 2 and all("failed" in e for e in errors), errors


def test_a_cards_readable_numbers_never_show_a_secret_beside_its_mask(attempt: Tally) -> None:
    shown = card_numbers(WIRE_ARGS)
    got_through = key_in(shown or "")
    attempt.record("approval card: a secret-keyed number in the readable numbers", got_through)
    assert shown == "amount = 5,000"
