"""``POST /api/copilot/hooks`` without the CLI: which call a derived call id names. The
identical call asked again while pending is that call (one request, whatever the model's
description of the command says); once allowed, the next
identical call is another one; a refused call keeps its answer for its identical retries;
the same command from another folder is another call; the prompt userPromptSubmitted sends
is the session's request — SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.claude_code.scene import TOKEN, coder
from tests.coding_agents.scene import untrusted_shell
from tests.coding_agents.test_codex_cli import INBOX, PROMPT
from tests.live_server import LiveServer, live_server

pytestmark = pytest.mark.both_databases
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def ask(srv: LiveServer, command: str, *, event: str = "preToolUse",
        cwd: str = "/work/repo", result: Any = None, description: str = "append") -> str:
    """Copilot's hook call for ``bash {command}``; what the model reads (or "ran")."""
    body: dict[str, Any] = {"sessionId": "s-1", "timestamp": 1796544183629, "cwd": cwd,
                            "toolName": "bash",
                            "toolArgs": {"command": command, "description": description}}
    if result is not None:
        body["toolResult"] = result
    r = httpx.post(f"{srv.url}/api/copilot/hooks", params={"agent": "coder", "event": event},
                   headers=AUTH, json=body, timeout=30)
    assert r.status_code == 200, r.text
    answer = json.loads(r.text)
    if answer.get("permissionDecision") == "allow":
        return f"ran: {answer['permissionDecisionReason']}"
    return str(answer.get("permissionDecisionReason", "ran"))


def requests(srv: LiveServer) -> list[dict[str, Any]]:
    r = httpx.get(f"{srv.url}/api/confirmations", headers=AUTH, params={"status": "all"})
    assert r.status_code == 200, r.text
    return list(r.json())


def decide(srv: LiveServer, request_id: str, decision: str) -> None:
    r = httpx.post(f"{srv.url}/api/confirmations/{request_id}/respond", headers=AUTH,
                   json={"decision": decision})
    assert r.status_code == 200, r.text


def test_a_derived_call_id_names_the_call_until_it_is_allowed(srv: LiveServer) -> None:
    gated = "echo x >> out.log"  # needs a person (the scene's rule on *.log files)
    first = ask(srv, gated)
    assert "pending: repeat the identical call" in first, first
    # The model words its description anew: still the identical call.
    assert "pending" in ask(srv, gated, description="append once more")
    [request] = requests(srv)  # the retry asked under the same id: no second request
    decide(srv, request["id"], "approve")
    # Approved by a person: Copilot's allow says so, and Copilot does not ask again.
    assert ask(srv, gated, description="now approved") == \
        f"ran: approved by alice in hookgate (request {request['id']})"
    assert ask(srv, "echo ungated") == "ran"  # nobody had to: no decision ({})
    ask(srv, gated, event="postToolUse", result={"resultType": "success",
                                                 "textResultForLlm": "ok"})
    # The call ran: the next identical call is a call of its own, which asks again.
    assert "pending" in ask(srv, gated)
    assert len(requests(srv)) == 2
    # The same command from another folder is another call, with a request of its own.
    assert "pending" in ask(srv, gated, cwd="/work/other")
    assert len(requests(srv)) == 3


def test_a_refused_call_keeps_its_answer_for_its_identical_retries(srv: LiveServer) -> None:
    gated = "echo y >> out.log"
    assert "pending" in ask(srv, gated)
    [request] = requests(srv)
    decide(srv, request["id"], "reject")
    for _ in range(2):
        told = ask(srv, gated)
        assert "rejected" in told, told
    assert len(requests(srv)) == 1


@pytest.fixture
def guarded(database_url: str) -> Iterator[LiveServer]:
    """``coder`` whose shell output is untrusted content (scene.untrusted_shell)."""
    deployment = untrusted_shell(coder(wait_s=0.3))
    deployment.database_url = database_url
    with live_server(deployment) as server:
        yield server


def test_the_users_prompt_is_the_sessions_request_so_the_address_it_gave_is_not_untrusted(
        guarded: LiveServer) -> None:
    r = httpx.post(f"{guarded.url}/api/copilot/hooks",
                   params={"agent": "coder", "event": "userPromptSubmitted"}, headers=AUTH,
                   json={"sessionId": "s-1", "timestamp": 1796544183629, "cwd": "/work/repo",
                         "prompt": PROMPT}, timeout=30)
    assert (r.status_code, r.text) == (200, "{}")  # go on
    assert ask(guarded, "cat inbox.txt") == "ran"
    ask(guarded, "cat inbox.txt", event="postToolUse",
        result={"resultType": "success", "textResultForLlm": INBOX})
    assert ask(guarded, "echo ops@example.org >> sent.txt") == "ran"
    assert "pending" in ask(guarded, "echo mallory@evil-mail.test >> sent.txt")
