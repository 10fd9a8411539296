"""Declarative hooks: commands, Python functions and HTTP endpoints speaking Claude Code's
hook protocol, declared per agent, running on real subprocesses and a real loopback server."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import socket
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from hookgate import (
    Agent,
    HookBuildError,
    PostToolUseHook,
    PreToolUseHook,
    ReActEngine,
    RunResult,
    ScriptedLLM,
    SessionStartHook,
    build_registry,
    tool,
)
from hookgate.matching import ToolMatcher

SCRIPTS = Path(__file__).parents[1] / "hookscripts"
PY = shlex.quote(sys.executable)

# -- the agent's tools -------------------------------------------------------------------------

paid: list[dict[str, Any]] = []
refunded: list[str] = []


@tool
def oa__purchase_pay(amount: int, vendor: str) -> str:
    """Pay a vendor."""
    paid.append({"amount": amount, "vendor": vendor})
    return f"paid {amount} to {vendor}"


@tool
def oa__refund(order: str) -> str:
    """Refund an order."""
    refunded.append(order)
    return f"refunded {order}"


@tool
def crm__lookup(customer: str) -> dict[str, str]:
    """Look a customer up."""
    return {"customer": customer, "card": "4111 1111 1111 1111"}


@pytest.fixture(autouse=True)
def _fresh_ledgers() -> None:
    paid.clear()
    refunded.clear()


def buyer(**hooks: Any) -> Agent:
    return Agent(
        id="buyer",
        name="Purchasing agent",
        instructions="You buy what the user asks for.",
        tools=[oa__purchase_pay, oa__refund, crm__lookup],
        model_config_json={"hooks": hooks},
        org_id="acme",
    )


class Run(SimpleNamespace):
    result: RunResult
    seen: list[list[dict[str, Any]]]

    def outcome(self, index: int = 0) -> dict[str, Any]:
        """The outcome of the turn's ``index``-th call (calls of a turn run concurrently)."""
        [event] = [e for e in self.result.tool_events() if e["tool_call_id"] == f"call_{index}"]
        return event

    def observation(self, index: int = 0) -> str:
        return str(self.outcome(index)["observation"])


async def run(agent: Agent, *calls: tuple[str, dict[str, Any]]) -> Run:
    """One model turn making ``calls``, then an answer; ``seen`` is what the model was shown."""
    seen: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(messages)
        if len(seen) == 1 and calls:
            return {"tool_calls": [{"id": f"call_{i}", "name": n, "args": a}
                                   for i, (n, a) in enumerate(calls)]}
        return {"answer": "done"}

    result = await ReActEngine(ScriptedLLM(model)).run(agent, "go", user_id="alice")
    return Run(result=result, seen=seen)


def answering(tmp_path: Path, answer: dict[str, Any]) -> str:
    """A command that answers ``answer`` on stdout, whatever it is asked."""
    path = tmp_path / f"answer-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(answer))
    return f"cat {shlex.quote(str(path))}"


def pre(**fields: Any) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", **fields}}


# -- hooks written for Claude Code run unchanged -----------------------------------------------


async def test_claude_code_bash_hook_denies_a_large_payment_and_the_bank_is_never_called():
    agent = buyer(command_hooks=[{
        "event": "PreToolUse", "matcher": "oa__purchase_pay",
        "command": f"bash {shlex.quote(str(SCRIPTS / 'deny_large_payment.sh'))}",
        "name": "spend-check",
    }])
    r = await run(agent, ("oa__purchase_pay", {"amount": 60000, "vendor": "ACME"}),
                  ("oa__purchase_pay", {"amount": 120, "vendor": "ACME"}))

    big, small = r.outcome(0), r.outcome(1)
    assert big["allowed"] is False and big["blocked_by"] == "spend-check"
    assert big["observation"] == ("Blocked by hook 'spend-check': payments above 50,000 need "
                                  "a purchase order (asked for 60000)")
    assert small["allowed"] is True
    assert paid == [{"amount": 120, "vendor": "ACME"}]


async def test_claude_code_python_hook_blocks_with_exit_2_and_its_stderr_is_the_reason():
    agent = buyer(command_hooks=[{
        "event": "PreToolUse", "matcher": "oa__purchase_pay",
        "command": f"{PY} {shlex.quote(str(SCRIPTS / 'blocked_vendors.py'))}",
    }])
    r = await run(agent, ("oa__purchase_pay", {"amount": 10, "vendor": "Shady Ltd"}))

    assert r.outcome()["allowed"] is False
    assert r.observation() == ("Blocked by hook 'command_hooks[0]': vendor 'Shady Ltd' is on "
                               "the blocked list")
    assert paid == []


async def test_a_hook_receives_the_input_claude_code_sends_plus_the_request_facts(tmp_path):
    pre_file, post_file = tmp_path / "pre.json", tmp_path / "post.json"
    agent = buyer(command_hooks=[
        {"event": "PreToolUse", "command": f"cat > {shlex.quote(str(pre_file))}"},
        {"event": "PostToolUse", "command": f"cat > {shlex.quote(str(post_file))}"},
    ])
    r = await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    got = json.loads(pre_file.read_text())
    assert got["hook_event_name"] == "PreToolUse"
    assert got["tool_name"] == "oa__purchase_pay"
    assert got["tool_input"] == {"amount": 5, "vendor": "ACME"}
    assert got["tool_use_id"] == "call_0"
    assert got["session_id"] == r.result.run_id
    assert got["cwd"] == os.getcwd()
    assert (got["hookgate_agent_id"], got["user_id"], got["org_id"]) == ("buyer", "alice", "acme")
    assert "agent_id" not in got  # Claude Code sends agent_id only inside delegated agents
    assert got["metadata"]["connector"] == "oa"
    assert got["metadata"]["requires_confirmation"] is False
    assert "tool_response" not in got
    after = json.loads(post_file.read_text())
    assert after["hook_event_name"] == "PostToolUse"
    assert after["tool_response"] == "paid 5 to ACME"


async def test_a_command_hook_runs_in_its_declared_working_directory(tmp_path):
    agent = buyer(command_hooks=[{"event": "PreToolUse", "command": "cat > seen.json",
                                  "cwd": str(tmp_path)}])
    await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert json.loads((tmp_path / "seen.json").read_text())["cwd"] == str(tmp_path)


# -- failures follow the hook's fail mode ------------------------------------------------------


async def test_plain_text_on_stdout_with_exit_0_is_ignored_as_claude_code_does():
    agent = buyer(command_hooks=[{"event": "PreToolUse", "command": "echo 'sure, go ahead'"}])
    r = await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert r.outcome()["allowed"] is True
    assert paid == [{"amount": 5, "vendor": "ACME"}]
    assert "sure, go ahead" not in r.observation()


async def test_a_hook_answering_invalid_json_blocks_the_call_when_closed():
    agent = buyer(command_hooks=[{"event": "PreToolUse",
                                  "command": "echo '{\"decision\": \"block\", '"}])
    r = await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert r.outcome()["allowed"] is False
    assert "not valid JSON" in r.observation()
    assert paid == []


async def test_a_hook_answering_invalid_json_is_traced_and_the_call_runs_when_open():
    agent = buyer(command_hooks=[{"event": "PreToolUse", "command": "echo '{\"cut off'",
                                  "fail_mode": "open", "name": "chatty"}])
    r = await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert r.outcome()["allowed"] is True
    assert paid == [{"amount": 5, "vendor": "ACME"}]
    failures = [h for h in r.outcome()["hooks"] if h["kind"] == "failed"]
    assert failures and failures[0]["hook"] == "chatty" and failures[0]["fail_mode"] == "open"
    assert "not valid JSON" in failures[0]["detail"]


async def test_an_exit_status_other_than_0_or_2_is_a_failure():
    agent = buyer(command_hooks=[{"event": "PreToolUse",
                                  "command": "echo 'policy file missing' >&2; exit 3"}])
    r = await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert r.outcome()["allowed"] is False
    assert "exited with status 3: policy file missing" in r.observation()
    assert paid == []


async def test_a_hook_that_hangs_is_killed_with_everything_it_started(tmp_path):
    pid_file = tmp_path / "sleeper.pid"
    agent = buyer(command_hooks=[{
        "event": "PreToolUse", "timeout": 0.5,
        "command": f"sleep 30 & echo $! > {shlex.quote(str(pid_file))}; wait",
    }])
    started = time.monotonic()
    r = await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert time.monotonic() - started < 10
    assert r.outcome()["allowed"] is False
    assert "timed out after 0.5s" in r.observation()
    assert paid == []
    sleeper = int(pid_file.read_text())
    assert await _gone(sleeper), "the hook's child process outlived the timeout"


async def _gone(pid: int) -> bool:
    for _ in range(50):
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        await asyncio.sleep(0.05)
    return False


async def test_an_answer_for_another_event_is_a_failure(tmp_path):
    answer = {"hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedToolOutput": "x"}}
    agent = buyer(command_hooks=[{"event": "PreToolUse", "command": answering(tmp_path, answer)}])
    r = await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert r.outcome()["allowed"] is False
    assert "hookEventName is 'PostToolUse', but this is a PreToolUse hook" in r.observation()


# -- what an answer can do ---------------------------------------------------------------------


async def test_ask_takes_the_call_to_the_approval_gate(tmp_path):
    answer = pre(permissionDecision="ask", permissionDecisionReason="new vendor")
    agent = buyer(command_hooks=[{"event": "PreToolUse", "command": answering(tmp_path, answer),
                                  "name": "new-vendor"}])
    r = await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "Newco"}))

    outcome = r.outcome()
    assert outcome["allowed"] is False
    assert outcome["blocked_by"] == "approval_gate"
    assert "no approval service is configured" in outcome["observation"]
    assert "new-vendor: asked for a person's approval: new vendor" in outcome["side_effects"]
    assert paid == []


async def test_allow_cannot_wave_through_a_call_that_needs_a_person(tmp_path):
    @tool(requires_confirmation=True)
    def oa__wire(amount: int) -> str:
        """Wire money."""
        return "wired"

    agent = buyer(command_hooks=[{"event": "PreToolUse",
                                  "command": answering(tmp_path, pre(permissionDecision="allow"))}])
    agent.tools.append(oa__wire)
    r = await run(agent, ("oa__wire", {"amount": 5}))

    assert r.outcome()["allowed"] is False
    assert r.outcome()["blocked_by"] == "approval_gate"


async def test_updated_input_rewrites_the_arguments_the_tool_receives(tmp_path):
    answer = pre(permissionDecision="allow",
                 updatedInput={"amount": 500, "vendor": "ACME Corp (verified)"})
    agent = buyer(command_hooks=[{"event": "PreToolUse", "command": answering(tmp_path, answer)}])
    r = await run(agent, ("oa__purchase_pay", {"amount": 500, "vendor": "acme"}))

    assert paid == [{"amount": 500, "vendor": "ACME Corp (verified)"}]
    assert r.outcome()["args"] == {"amount": 500, "vendor": "ACME Corp (verified)"}


async def test_updated_input_replaces_the_arguments_whole_as_in_claude_code(tmp_path):
    answer = pre(updatedInput={"vendor": "ACME"})
    agent = buyer(command_hooks=[{"event": "PreToolUse", "command": answering(tmp_path, answer)}])
    r = await run(agent, ("oa__purchase_pay", {"amount": 500, "vendor": "acme"}))

    assert r.outcome()["allowed"] is False
    assert "rewrote the arguments into invalid ones" in r.observation()
    assert paid == []


async def test_legacy_top_level_block_decision_still_denies(tmp_path):
    answer = {"decision": "block", "reason": "frozen account"}
    agent = buyer(command_hooks=[{"event": "PreToolUse", "command": answering(tmp_path, answer)}])
    r = await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert r.observation() == "Blocked by hook 'command_hooks[0]': frozen account"


async def test_updated_tool_output_is_what_the_model_sees(tmp_path):
    answer = {"systemMessage": "output tidied",
              "hookSpecificOutput": {"hookEventName": "PostToolUse",
                                     "updatedToolOutput": "payment recorded",
                                     "additionalContext": "ledger synced"}}
    agent = buyer(command_hooks=[{"event": "PostToolUse", "command": answering(tmp_path, answer),
                                  "name": "tidy"}])
    r = await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert paid == [{"amount": 5, "vendor": "ACME"}]
    # additionalContext goes next to the (rewritten) output, as Claude Code shows it.
    assert r.observation() == "payment recorded\n\nledger synced"
    tool_messages = [m for m in r.seen[1] if m["role"] == "tool"]
    assert tool_messages[0]["content"] == "payment recorded\n\nledger synced"
    assert r.outcome()["side_effects"] == ["tidy: message: output tidied",
                                           "tidy: context: ledger synced"]


async def test_post_tool_use_block_adds_its_reason_next_to_the_output(tmp_path):
    # Claude Code's PostToolUse "block" does not hide the output (the tool already ran):
    # the reason is shown to the model next to it. Hiding output is updatedToolOutput's job.
    answer = {"decision": "block", "reason": "check the card number before quoting it"}
    agent = buyer(command_hooks=[{"event": "PostToolUse", "matcher": "crm__lookup",
                                  "command": answering(tmp_path, answer), "name": "pii"}])
    r = await run(agent, ("crm__lookup", {"customer": "bob"}))

    assert r.observation() == ('{"customer": "bob", "card": "4111 1111 1111 1111"}\n\n'
                               "check the card number before quoting it")


async def test_session_start_context_reaches_the_system_prompt(tmp_path):
    answer = {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                     "additionalContext": "Budget left this month: 12,000."}}
    agent = buyer(command_hooks=[
        {"event": "SessionStart", "command": answering(tmp_path, answer)},
        {"event": "SessionStart", "command": "echo 'The org is read-only today.'"},
    ])
    r = await run(agent)

    system = r.seen[0][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You buy what the user asks for.")
    assert "Budget left this month: 12,000." in system["content"]
    assert "The org is read-only today." in system["content"]


async def test_session_start_continue_false_stops_the_session(tmp_path):
    answer = {"continue": False, "stopReason": "maintenance window"}
    agent = buyer(command_hooks=[{"event": "SessionStart", "command": answering(tmp_path, answer)}])
    r = await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert r.result.status == "session_blocked"
    assert "maintenance window" in (r.result.error or "")
    assert r.seen == [] and paid == []


# -- python hooks ------------------------------------------------------------------------------


@pytest.fixture
def pyhooks(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))
    import pyhooks

    pyhooks.SEEN.clear()
    return pyhooks


async def test_sync_python_hook_scrubs_card_numbers_from_the_output(pyhooks):
    agent = buyer(python_hooks=[{"event": "PostToolUse", "matcher": "re:^crm__",
                                 "function": "pyhooks:scrub_card_numbers"}])
    r = await run(agent, ("crm__lookup", {"customer": "bob"}),
                  ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert "4111 1111" not in r.observation(0)
    assert "**** **** **** ****" in r.observation(0)
    assert [e["tool_name"] for e in pyhooks.SEEN] == ["crm__lookup"]
    assert pyhooks.SEEN[0]["tool_response"]["card"] == "4111 1111 1111 1111"


async def test_async_python_hook_denies_a_refund(pyhooks):
    agent = buyer(python_hooks=[{"event": "PreToolUse", "matcher": "oa__refund",
                                 "function": "pyhooks:refuse_refunds_on_weekends"}])
    r = await run(agent, ("oa__refund", {"order": "PO-7"}))

    assert r.observation() == "Blocked by hook 'python_hooks[0]': no refunds at weekends"
    assert refunded == []


@pytest.mark.parametrize(("function", "message"), [
    ("pyhooks:answers_a_list", "must be a JSON object (or nothing), got list"),
    ("pyhooks:raises", "RuntimeError: the policy service is down"),
])
async def test_a_python_hook_that_breaks_fails_closed(pyhooks, function, message):
    agent = buyer(python_hooks=[{"event": "PreToolUse", "function": function}])
    r = await run(agent, ("oa__refund", {"order": "PO-7"}))

    assert r.outcome()["allowed"] is False
    assert message in r.observation()
    assert refunded == []


# -- http hooks --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hook_server():
    received: list[dict[str, Any]] = []

    async def allow(request: Request) -> Response:
        received.append({"body": await request.json(), "headers": dict(request.headers)})
        return Response(status_code=200)

    async def deny(request: Request) -> Response:
        return JSONResponse(pre(permissionDecision="deny",
                                permissionDecisionReason="vendor not onboarded"))

    async def broken(request: Request) -> Response:
        return PlainTextResponse("policy engine exploded", status_code=500)

    async def slow(request: Request) -> Response:
        await asyncio.sleep(5)
        return Response(status_code=200)

    app = Starlette(routes=[Route(f"/{f.__name__}", f, methods=["POST"])
                            for f in (allow, deny, broken, slow)])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off",
                                           timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.02)
    port = sock.getsockname()[1]
    yield SimpleNamespace(url=f"http://127.0.0.1:{port}", received=received)
    server.should_exit = True
    thread.join(timeout=5)


async def test_http_hook_that_answers_with_an_empty_2xx_lets_the_call_run(hook_server):
    agent = buyer(http_hooks=[{"event": "PreToolUse", "matcher": "*",
                               "url": f"{hook_server.url}/allow",
                               "headers": {"X-Hook-Token": "s3cret"}}])
    await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert paid == [{"amount": 5, "vendor": "ACME"}]
    request = hook_server.received[-1]
    assert request["headers"]["x-hook-token"] == "s3cret"
    assert request["body"]["hook_event_name"] == "PreToolUse"
    assert request["body"]["tool_input"] == {"amount": 5, "vendor": "ACME"}


async def test_http_hook_denies(hook_server):
    agent = buyer(http_hooks=[{"event": "PreToolUse", "url": f"{hook_server.url}/deny"}])
    r = await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert r.observation() == "Blocked by hook 'http_hooks[0]': vendor not onboarded"
    assert paid == []


async def test_http_hook_answering_an_error_status_fails_closed(hook_server):
    agent = buyer(http_hooks=[{"event": "PreToolUse", "url": f"{hook_server.url}/broken"}])
    r = await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert r.outcome()["allowed"] is False
    assert "answered 500 Internal Server Error: policy engine exploded" in r.observation()
    assert paid == []


async def test_http_hook_that_does_not_answer_in_time_fails_closed(hook_server):
    agent = buyer(http_hooks=[{"event": "PreToolUse", "url": f"{hook_server.url}/slow",
                               "timeout": 0.5}])
    started = time.monotonic()
    r = await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert time.monotonic() - started < 4
    assert "timed out after 0.5s" in r.observation()
    assert paid == []


# -- matchers and conditions -------------------------------------------------------------------


@pytest.mark.parametrize(("matcher", "tool_name", "fires"), [
    ("oa__purchase_pay", "oa__purchase_pay", True),
    ("oa__purchase_pay", "oa__purchase_pay_later", False),  # exact, not a prefix
    ("oa__purchase_pay|oa__refund", "oa__refund", True),
    ("oa__purchase_pay|oa__refund", "crm__lookup", False),
    ("oa__.*", "oa__refund", True),  # a regex, as in Claude Code
    ("oa__.*", "crm__lookup", False),
    ("pay", "oa__purchase_pay", False),  # letters only: an exact name
    ("pay$", "oa__purchase_pay", True),  # a regex is searched, unanchored
    ("re:^crm__", "crm__lookup", True),
    ("re:^crm__", "x_crm__lookup", False),
    ("*", "anything", True),
    ("", "anything", True),
    (None, "anything", True),
])
def test_matchers_read_like_claude_codes(matcher, tool_name, fires):
    assert ToolMatcher.parse(matcher).matches(tool_name) is fires


async def test_only_matching_tools_pass_through_a_hook(tmp_path):
    agent = buyer(command_hooks=[{"event": "PreToolUse", "matcher": "oa__refund",
                                  "command": "echo 'refunds are closed' >&2; exit 2"}])
    r = await run(agent, ("oa__refund", {"order": "PO-1"}),
                  ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert r.outcome(0)["allowed"] is False
    assert r.outcome(1)["allowed"] is True
    assert refunded == [] and paid == [{"amount": 5, "vendor": "ACME"}]


async def test_when_condition_picks_the_calls_a_hook_sees():
    agent = buyer(command_hooks=[{
        "event": "PreToolUse", "matcher": "oa__purchase_pay|oa__refund",
        "when": "args.amount > 50000 and args.vendor != 'Treasury'",
        "command": "echo 'over the limit' >&2; exit 2", "name": "spend-check",
    }])
    r = await run(agent, ("oa__purchase_pay", {"amount": 60000, "vendor": "ACME"}),
                  ("oa__purchase_pay", {"amount": 60000, "vendor": "Treasury"}),
                  ("oa__purchase_pay", {"amount": 100, "vendor": "ACME"}))

    assert [r.outcome(i)["allowed"] for i in range(3)] == [False, True, True]
    assert r.observation(0) == "Blocked by hook 'spend-check': over the limit"


async def test_a_when_condition_that_cannot_be_evaluated_counts_as_a_match():
    agent = buyer(command_hooks=[{
        "event": "PreToolUse", "when": "args.amount > 50000",
        "command": "echo 'checked' >&2; exit 2", "name": "spend-check",
    }])
    r = await run(agent, ("oa__refund", {"order": "PO-1"}))  # has no amount

    assert r.outcome()["allowed"] is False
    assert any("could not be evaluated" in s and "fail closed" in s
               for s in r.outcome()["side_effects"])
    assert refunded == []


# -- building ----------------------------------------------------------------------------------


def test_declared_hooks_are_real_hooks_with_readable_matchers(pyhooks):
    agent = buyer(
        command_hooks=[{"event": "PreToolUse", "matcher": "oa__purchase_pay|oa__refund",
                        "command": "true", "name": "spend-check", "priority": 50,
                        "timeout": 5, "fail_mode": "open"}],
        python_hooks=[{"event": "PostToolUse", "function": "pyhooks:scrub_card_numbers"}],
        http_hooks=[{"event": "SessionStart", "url": "http://127.0.0.1:9/hook"}],
    )
    registry = build_registry(agent)

    spend = registry.get("spend-check")
    assert isinstance(spend, PreToolUseHook)
    assert (spend.priority, spend.timeout, spend.fail_mode) == (50, 5.0, "open")
    assert spend.matcher == "oa__purchase_pay|oa__refund"  # type: ignore[attr-defined]
    scrub = registry.get("python_hooks[0]")
    assert isinstance(scrub, PostToolUseHook)
    assert (scrub.priority, scrub.timeout, scrub.fail_mode) == (100, 60.0, "closed")
    assert scrub.matcher == "*"  # type: ignore[attr-defined]
    assert isinstance(registry.get("http_hooks[0]"), SessionStartHook)
    gate = registry.get("approval_gate")
    assert getattr(gate, "matcher", None) is None


@pytest.mark.parametrize(("hooks", "message"), [
    ({"command_hooks": [{"event": "PreToolUse", "command": "true", "comand": "x"}]},
     "hooks.command_hooks[0]: unknown keys 'comand'"),
    ({"command_hooks": [{"event": "PreToolUse"}]},
     "hooks.command_hooks[0]: a command hook needs 'command'"),
    ({"python_hooks": [{"event": "PreToolUse", "name": "p"}]},
     "hooks.python_hooks[0] 'p': a python hook needs 'function'"),
    ({"python_hooks": [{"event": "PreToolUse", "function": "pyhooks:nope"}]},
     "hooks.python_hooks[0]: 'pyhooks:nope' cannot be imported"),
    ({"python_hooks": [{"event": "PreToolUse", "function": "pyhooks:NotAFunction"}]},
     "is a class"),
    ({"http_hooks": [{"event": "PreToolUse"}]},
     "hooks.http_hooks[0]: an http hook needs 'url'"),
    ({"http_hooks": [{"event": "PreToolUse", "url": "ftp://example.com/x"}]},
     "must be an http:// or https:// URL"),
    ({"command_hooks": [{"event": "BeforeToolUse", "command": "true"}]},
     "hooks.command_hooks[0]: unknown event 'BeforeToolUse'"),
    ({"command_hooks": [{"command": "true"}]}, "'event' is missing"),
    ({"command_hooks": [{"event": "PreToolUse", "command": "true", "matcher": "oa__(pay"}]},
     "matcher 'oa__(pay' is not a valid regular expression"),
    ({"command_hooks": [{"event": "PreToolUse", "command": "true", "when": "args.amount >"}]},
     "'when' 'args.amount >' is not a valid expression"),
    ({"command_hooks": [{"event": "PreToolUse", "command": "true", "when": "amount > 5"}]},
     "uses unknown names amount"),
    ({"command_hooks": [{"event": "PreToolUse", "command": "true", "when": "x = 5"}]},
     "is not a valid expression"),
    ({"command_hooks": [{"event": "PreToolUse", "command": "true", "fail_mode": "lenient"}]},
     "'fail_mode' must be 'closed' or 'open'"),
    ({"command_hooks": [{"event": "PreToolUse", "command": "true", "timeout": 0}]},
     "'timeout' must be a positive number"),
    ({"command_hooks": [{"event": "PreToolUse", "command": "true", "priority": "high"}]},
     "'priority' must be a whole number"),
    ({"command_hooks": [{"event": "SessionStart", "command": "true", "matcher": "oa__x"}]},
     "SessionStart fires once per session"),
    ({"command_hooks": [{"event": "PreToolUse", "command": "true", "name": "a"},
                        {"event": "PreToolUse", "command": "true", "name": "a"}]},
     "hooks.command_hooks[1] 'a': a hook named 'a' is already registered"),
    ({"command_hooks": {"event": "PreToolUse"}}, "hooks.command_hooks must be a list"),
    ({"command_hooks": ["true"]}, "hooks.command_hooks[0]: an entry must be a mapping"),
])
def test_a_bad_declaration_is_a_build_error_naming_the_agent_and_the_entry(
        pyhooks, hooks, message):
    with pytest.raises(HookBuildError) as caught:
        build_registry(buyer(**hooks))
    assert str(caught.value).startswith("agent 'buyer': ")
    assert message in str(caught.value)


async def test_an_agent_with_a_bad_declaration_does_not_run():
    agent = buyer(command_hooks=[{"event": "PreToolUse", "command": "true", "when": "x >"}])
    r = await run(agent, ("oa__purchase_pay", {"amount": 5, "vendor": "ACME"}))

    assert r.result.status == "blocked_build"
    assert "hooks.command_hooks[0]" in (r.result.error or "")
    assert r.seen == [] and paid == []
