""""Withheld" and "redacted" hold in every sink, not only in what the model reads: every hook
kind (class, Python callable, command, HTTP, Claude Code protocol) failing every way (raises,
times out, returns a non-HookResult, "blocks" quoting the output), a PostToolUse rewrite to
``[redacted by policy]``, and a tool that raises with the secret in its error. A card number
sits in the tool's output and in its error; spans, metrics, server log lines, every table of
the database (run events, audit rows, the ledger), every response a member can fetch, and
every request body the chat platform receives (approval cards and their updates, for gated
calls approved before the card number came out) are searched for it. The admins' trace view
is the one door to what the hooks and tool said."""

from __future__ import annotations

import asyncio
import json
import logging
import shlex
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from hookgate import Agent, HookContext, HookResult, PostToolUseHook, ScriptedLLM, Tool, tool
from hookgate.runtime.deployment import ChannelSpec, Deployment, OrgSpec, UserSpec, token_digest
from hookgate.storage.database import Database
from hookgate.storage.tables import Base
from tests.adversarial.conftest import Tally
from tests.adversarial.test_withheld_attempts import echo_url
from tests.channels.conftest import secrets_key
from tests.fakes.slack import FakeSlack
from tests.hooks_builtin.server_world import TOKENS, auth
from tests.live_server import live_server
from tests.server.test_api import wait_run
from tests.sse import read_events
from tests.telemetry.conftest import Otel, otel

__all__ = ["echo_url", "otel", "secrets_key"]

pytestmark = pytest.mark.both_databases

CARD = "4111 1111 1111 1111"
DIGITS = CARD.replace(" ", "")
REDACTED = "[redacted by policy]"


def tools() -> list[Tool]:
    @tool
    async def crm__card(customer: str) -> str:
        """The customer's card on file."""
        return f"{customer} pays with card={CARD}"

    @tool
    async def crm__charge(customer: str) -> str:
        """Charge the customer's card."""
        raise RuntimeError(f"cannot charge {customer}: card={CARD} declined")

    return [crm__card, crm__charge]


class RaisesQuotingOutput(PostToolUseHook):
    name = "raises_quoting_output"

    async def execute(self, ctx: HookContext) -> HookResult:
        raise ValueError(f"cannot redact: {ctx.tool_result}")


class TimesOut(PostToolUseHook):
    name = "times_out"
    timeout = 0.3

    async def execute(self, ctx: HookContext) -> HookResult:
        await asyncio.sleep(30)
        return HookResult()


class AnswersAString(PostToolUseHook):
    name = "answers_a_string"

    async def execute(self, ctx: HookContext) -> HookResult:
        return f"classified {ctx.tool_result}"  # type: ignore[return-value]


class BlocksQuotingOutput(PostToolUseHook):
    name = "blocks_quoting_output"

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(allow=False, error=f"refused: {ctx.tool_result}",
                          side_effects=[f"saw {ctx.tool_result}"])


class Redacts(PostToolUseHook):
    name = "redacts"
    priority = 1

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(modified_result=REDACTED)


def python_failure(event: dict[str, Any]) -> None:
    """A declared Python callable that fails quoting what the tool said."""
    raise ValueError(f"unexpected: {event.get('tool_response') or event.get('error')}")


def _script(status: int) -> str:
    code = ("import json,sys; e=json.load(sys.stdin); t=str(e.get('tool_response') or "
            f"e.get('error')); print(t); sys.stderr.write('cannot redact: '+t); sys.exit({status})")
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def claude_code_block() -> dict[str, Any]:
    # A Claude Code settings block: one handler crashes (exit 1), one "blocks" (exit 2),
    # both quoting the tool's response (or, after a failure, its error) on stderr.
    handlers = [{"type": "command", "command": _script(1)},
                {"type": "command", "command": _script(2)}]
    group = [{"matcher": "*", "hooks": handlers}]
    return {"hooks": {"PostToolUse": group, "PostToolUseFailure": group}}


def failing_hooks(url: str) -> dict[str, Any]:
    here = __name__
    post = {"event": "PostToolUse"}
    return {
        "class_hooks": [f"{here}:RaisesQuotingOutput", f"{here}:TimesOut",
                        f"{here}:AnswersAString", f"{here}:BlocksQuotingOutput", "audit_log"],
        "python_hooks": [{**post, "name": "python_failure",
                          "function": f"{here}:python_failure"}],
        "command_hooks": [{**post, "name": "command_failure", "command": _script(1)}],
        "http_hooks": [{**post, "name": "http_failure", "url": url}],
        "claude_code": claude_code_block(),
    }


CALLS = [{"tool_calls": [{"id": "c_card", "name": "crm__card", "args": {"customer": "Globex"}},
                         {"id": "c_charge", "name": "crm__charge",
                          "args": {"customer": "Globex"}}]}]


def deployment(database_url: str, url: str) -> Deployment:
    def agent(agent_id: str, hooks: dict[str, Any]) -> Agent:
        return Agent(id=agent_id, name=agent_id, instructions="", org_id="acme",
                     owner_user_id="alice", tools=tools(), model_config_json={"hooks": hooks})

    return Deployment(
        database_url=database_url,
        orgs=[OrgSpec("acme", "ACME Corp")],
        users=[UserSpec("alice", "acme", admin=True,
                        token_sha256=token_digest(TOKENS["alice"])),
               UserSpec("bob", "acme", token_sha256=token_digest(TOKENS["bob"]))],
        agents={"failing": agent("failing", failing_hooks(url)),
                "redacting": agent("redacting", {"class_hooks": [
                    f"{__name__}:Redacts", f"{__name__}:BlocksQuotingOutput", "audit_log"]})},
        model_for=lambda _a: ScriptedLLM([*CALLS, {"answer": "done"}]),
    )


def has_marker(value: Any) -> bool:
    text = value if isinstance(value, str) else json.dumps(value, default=str,
                                                           ensure_ascii=False)
    return DIGITS in text.replace(" ", "").replace("-", "")


def span_texts(otel: Otel) -> list[str]:
    texts = []
    for span in otel.spans():
        texts += [span.name, span.status.description or "",
                  json.dumps(dict(span.attributes or {}), default=str)]
        texts += [json.dumps([e.name, dict(e.attributes or {})], default=str)
                  for e in span.events]
    data = otel.reader.get_metrics_data()
    texts.append(data.to_json() if data is not None else "")
    return texts


async def every_row(database_url: str) -> list[dict[str, Any]]:
    db = Database(database_url)
    try:
        async with db.engine.connect() as conn:
            rows: list[dict[str, Any]] = []
            for table in Base.metadata.sorted_tables:
                result = await conn.execute(select(table))
                rows += [{"table": table.name, **dict(r._mapping)} for r in result]
            return rows
    finally:
        await db.dispose()


@pytest.fixture
def server_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)
    yield caplog


def run_as_member(c: httpx.Client, agent_id: str) -> tuple[str, list[Any]]:
    """Bob (a member) starts a run and reads everything a member can about it."""
    r = c.post("/api/runs", json={"agent_id": agent_id, "message": "go"}, headers=auth("bob"))
    assert r.status_code == 200, r.text
    run_id = str(r.json()["run_id"])
    seen: list[Any] = [wait_run(c, run_id, user="bob")]
    with c.stream("GET", f"/api/runs/{run_id}/events", headers=auth("bob")) as resp:
        seen.append([ev.data for ev in read_events(resp) if not ev.comment and ev.data])
    for path in ("/api/confirmations", "/api/audit", "/api/runs"):
        got = c.get(path, headers=auth("bob"))
        seen.append([path, got.status_code, got.text])
    return run_id, seen


def test_nothing_withheld_or_redacted_leaves_through_spans_logs_storage_or_the_api(
        database_url: str, echo_url: str, otel: Otel,
        server_logs: pytest.LogCaptureFixture, attempt: Tally) -> None:
    with live_server(deployment(database_url, echo_url)) as srv, httpx.Client(
            base_url=srv.url, timeout=30) as c:
        failing_id, failing_seen = run_as_member(c, "failing")
        redacting_id, redacting_seen = run_as_member(c, "redacting")
        admin = {run_id: c.get(f"/api/runs/{run_id}", headers=auth("alice")).json()
                 for run_id in (failing_id, redacting_id)}
    rows = asyncio.run(every_row(database_url))

    # What the model read: the fixed sentence, or the rewrite.
    outcomes = {e["tool_call_id"]: e for e in failing_seen[0]["trace"]
                if e["type"] == "tool_result"}
    assert {o["status"] for o in outcomes.values()} == {"withheld"}
    redacted = {e["tool_call_id"]: e for e in redacting_seen[0]["trace"]
                if e["type"] == "tool_result"}
    assert [redacted[c]["observation"] for c in ("c_card", "c_charge")] == [REDACTED] * 2
    assert redacted["c_charge"]["error"] == "Error: tool 'crm__charge' failed (RuntimeError)."

    sinks = {
        "spans and metrics": span_texts(otel),
        "server log lines": [server_logs.text],
        "database rows (run events, audit rows, ledger, runs)": rows,
        "member: run, event stream, confirmations, audit, runs (failing hooks)": failing_seen,
        "member: run, event stream, confirmations, audit, runs (redacted)": redacting_seen,
    }
    for sink, texts in sinks.items():
        got_through = has_marker(texts)
        attempt.record(f"observability: the card number in {sink}", got_through)
        assert not got_through, sink
    assert any(r["table"] == "connector_call_logs" for r in rows)
    assert "/api/audit" in json.dumps(failing_seen)

    # Each block and each hook failure is one server log line, masked.
    lines = [r for r in server_logs.records if r.name.startswith("hookgate.")]
    failed = [r.getMessage() for r in lines if "PostToolUse hook '" in r.getMessage()]
    for hook in ("raises_quoting_output", "times_out", "answers_a_string", "python_failure",
                 "command_failure", "http_failure", "claude_code:PostToolUse",
                 "claude_code:PostToolUseFailure"):
        assert any(f"hook '{hook}'" in m for m in failed), (hook, failed)
    assert any("timed out after 0.3s" in m for m in failed)

    # The one door: the admins' trace view shows what the hooks and the tool said, masked.
    trace = [e for e in admin[failing_id]["trace"] if e["type"] == "tool_result"]
    outputs = [h["admin_output"] for e in trace for h in e["hooks"] if "admin_output" in h]
    assert any("cannot redact: Globex pays with card=••••1111" in o for o in outputs)
    assert any("cannot charge Globex: card=••••1111 declined" in o for o in outputs)
    [charge] = [e for e in admin[redacting_id]["trace"] if e.get("tool_call_id") == "c_charge"
                and e["type"] == "tool_result"]
    assert "RuntimeError: cannot charge Globex: card=••••1111 declined" in charge["admin_error"]
    attempt.record("observability: the card number in the admins' trace view",
                   has_marker(admin))
    assert not has_marker(admin)


# -- chat cards: a gated call approved before the card number came out -------------------------


def gated_tools() -> list[Tool]:
    @tool(requires_confirmation=True)
    async def crm__card(customer: str) -> str:
        """The customer's card on file."""
        return f"{customer} pays with card={CARD}"

    @tool(requires_confirmation=True)
    async def crm__charge(customer: str) -> str:
        """Charge the customer's card."""
        raise RuntimeError(f"cannot charge {customer}: card={CARD} declined")

    return [crm__card, crm__charge]


def _one_call(call_id: str, name: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "args": {"customer": "Globex"}}]}


#: Each gated call comes after the one before it ran, so every later card is made (and every
#: earlier card updated) while the run already holds the card number in an output or error.
GATED_TURNS = [_one_call("g_card", "crm__card"), _one_call("g_charge", "crm__charge"),
               _one_call("g_card_again", "crm__card"), {"answer": "done"}]


def carded_deployment(database_url: str, slack: FakeSlack) -> Deployment:
    def agent(agent_id: str, hooks: list[str]) -> Agent:
        return Agent(id=agent_id, name=agent_id, instructions="", org_id="acme",
                     owner_user_id="alice", tools=gated_tools(),
                     approval_channel_id="ops-slack",
                     model_config_json={"hooks": {"class_hooks": hooks}})

    return Deployment(
        database_url=database_url,
        orgs=[OrgSpec("acme", "ACME Corp")],
        users=[UserSpec("alice", "acme", admin=True, token_sha256=token_digest(TOKENS["alice"]),
                        slack_user_id="U_ALICE"),
               UserSpec("bob", "acme", token_sha256=token_digest(TOKENS["bob"]),
                        slack_user_id="U_BOB")],
        agents={"redacting": agent("redacting", [f"{__name__}:Redacts",
                                                 f"{__name__}:BlocksQuotingOutput",
                                                 "audit_log"]),
                "withholding": agent("withholding", [f"{__name__}:RaisesQuotingOutput",
                                                     f"{__name__}:BlocksQuotingOutput",
                                                     "audit_log"])},
        channels=[ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())],
        model_for=lambda _a: ScriptedLLM(list(GATED_TURNS)),
    )


def approve_each_gated_call(c: httpx.Client, run_id: str) -> list[str]:
    """Bob (who started the run) approves every card the run raises, through the API,
    until the run finishes; the tool names approved, in order."""
    approved: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run = c.get(f"/api/runs/{run_id}", headers=auth("bob")).json()
        if run["status"] not in ("running", "awaiting_approval"):
            return approved
        pending = c.get("/api/confirmations", params={"status": "pending"},
                        headers=auth("bob")).json()
        for request in pending:
            r = c.post(f"/api/confirmations/{request['id']}/respond",
                       json={"decision": "approve", "reason": "fine"}, headers=auth("bob"))
            assert r.status_code == 200, r.text
            approved.append(request["payload"]["tool_name"])
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish")


def test_no_chat_card_or_card_update_carries_what_an_approved_tool_said_or_raised(
        database_url: str, secrets_key: str, attempt: Tally) -> None:
    with FakeSlack() as slack, live_server(carded_deployment(database_url, slack)) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as c:
        for agent_id in ("redacting", "withholding"):
            r = c.post("/api/runs", json={"agent_id": agent_id, "message": "charge Globex"},
                       headers=auth("bob"))
            assert r.status_code == 200, r.text
            run_id = str(r.json()["run_id"])
            approved = approve_each_gated_call(c, run_id)
            assert approved == ["crm__card", "crm__charge", "crm__card"], approved
            run = wait_run(c, run_id, user="bob")
            results = {e["tool_call_id"]: e for e in run["trace"] if e["type"] == "tool_result"}
            assert set(results) == {"g_card", "g_charge", "g_card_again"}
            if agent_id == "redacting":
                assert results["g_card"]["observation"] == REDACTED
        deadline = time.monotonic() + 20
        while (sum(len(m.updates) for m in slack.messages.values()) < 6
               and time.monotonic() < deadline):
            time.sleep(0.05)

    created = slack.requests_to("/api/chat.postMessage")
    updated = slack.requests_to("/api/chat.update")
    # A card for each gated call, each updated when it was decided.
    assert len(created) == 6 and len(updated) >= 6, (len(created), len(updated))
    assert slack.violations == []
    assert all("Globex" in r.body.decode() for r in created)
    for kind, requests in (("approval cards", created), ("card updates", updated),
                           ("every request to the platform", slack.received)):
        got_through = any(has_marker(r.body.decode("utf-8", "replace")) for r in requests)
        attempt.record(f"observability: the card number in Slack {kind}", got_through)
        assert not got_through, kind
