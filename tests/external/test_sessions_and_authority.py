"""The session rule and authority at the moment of use, on the guarded-call API and the
Claude Code endpoint: a call of a session never started runs SessionStart first (once; a
stop refuses the call), and an asker moved to another org finds none of the old org's calls
— asking, waiting (also a long-poll woken by the decision), peeking or reporting."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookgate.storage.users import sync_declared_users
from tests.external.world import ALICE, ask, audit_rows, deployment, h
from tests.live_server import LiveServer, live_server
from tests.polling import wait_for

pytestmark = pytest.mark.both_databases

STOPPER = {"event": "SessionStart", "name": "policy_loader",
           "command": "cat > /dev/null; echo 'policy file missing' >&2; exit 1"}


def counter(path: Path) -> dict[str, Any]:
    return {"event": "SessionStart", "name": "session_counter",
            "command": f"cat > /dev/null; echo started >> {path}; echo 'Deploys are frozen.'"}


def test_a_call_in_a_session_never_started_runs_session_start_first_once(
        database_url: str, tmp_path: Path, attempt: Any) -> None:
    runs = tmp_path / "runs.txt"
    with live_server(deployment(database_url, command_hooks=[counter(runs)])) as srv:
        first = ask(srv.url, "s-new", "c1", "search", {"q": "x"})
        attempt.record("external: a call of a session never started skips SessionStart",
                       not runs.exists())
        assert first.json()["decision"] == "allow"
        assert "Deploys are frozen." in (first.json()["note"] or "")
        ask(srv.url, "s-new", "c2", "search", {"q": "y"})
        assert runs.read_text().count("started") == 1
        # A session started explicitly runs it there, and its calls run none.
        r = httpx.post(f"{srv.url}/api/v1/sessions", headers=h(),
                       json={"agent": "payer", "session_id": "s-explicit"})
        assert r.json()["context"] == "Deploys are frozen."
        ask(srv.url, "s-explicit", "c3", "search", {"q": "x"})
        assert runs.read_text().count("started") == 2
        # Claude Code: a PreToolUse of a session hookgate never saw start runs it first.
        body = {"hook_event_name": "PreToolUse", "session_id": "cc-new", "cwd": "/w",
                "tool_name": "Read", "tool_input": {"file_path": "/w/a"},
                "tool_use_id": "toolu_1"}
        r = httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": "payer"},
                       headers=h(), json=body)
        assert r.status_code == 200, r.text
        assert runs.read_text().count("started") == 3


def test_a_session_start_that_stops_refuses_the_first_call_on_both_paths(
        database_url: str, attempt: Any) -> None:
    with live_server(deployment(database_url, command_hooks=[STOPPER])) as srv:
        r = ask(srv.url, "s-stop", "c1", "search", {"q": "x"})
        allowed = r.json()["decision"] != "deny"
        attempt.record("external: a session whose SessionStart stops still runs calls",
                       allowed)
        assert not allowed and "policy_loader" in r.json()["reason"]
        body = {"hook_event_name": "PreToolUse", "session_id": "cc-stop", "cwd": "/w",
                "tool_name": "Read", "tool_input": {"file_path": "/w/a"},
                "tool_use_id": "toolu_1"}
        answer = httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": "payer"},
                            headers=h(), json=body).json()
        assert answer["hookSpecificOutput"]["permissionDecision"] == "deny", answer
        assert answer["continue"] is False and "policy_loader" in answer["stopReason"]


@pytest.fixture
def srv(database_url: str) -> Iterator[LiveServer]:
    with live_server(deployment(database_url), access_recheck_s=0.2) as server:
        yield server


def move_bot(srv: LiveServer) -> None:
    users = [dataclasses.replace(u, org="other") if u.id == "bot" else u
             for u in srv.runtime.deployment.users]
    srv.call(sync_declared_users(srv.runtime.db, users))


def test_an_asker_moved_to_another_org_finds_none_of_the_old_orgs_calls(
        srv: LiveServer, attempt: Any) -> None:
    allowed = ask(srv.url, "s-move", "a1", "search", {"q": "x"}).json()
    gated = ask(srv.url, "s-move", "a2", "transfer", {"amount": 5}).json()
    waiting = ask(srv.url, "s-move", "a3", "transfer", {"amount": 6}).json()
    assert (allowed["decision"], gated["decision"], waiting["decision"]) == (
        "allow", "pending", "pending")
    # A long-poll that is waiting when the asker moves, woken by the decision after it.
    box: dict[str, httpx.Response] = {}
    poll = threading.Thread(target=lambda: box.update(r=httpx.get(
        f"{srv.url}/api/v1/calls/{waiting['call']}", params={"wait": 60}, headers=h(),
        timeout=90)))
    poll.start()
    move_bot(srv)
    r = httpx.post(f"{srv.url}/api/confirmations/{gated['request_id']}/respond",
                   headers=h(ALICE), json={"decision": "approve"})
    assert r.status_code == 200, r.text
    r = httpx.post(f"{srv.url}/api/confirmations/{waiting['request_id']}/respond",
                   headers=h(ALICE), json={"decision": "approve"})
    assert r.status_code == 200, r.text
    poll.join(90)
    woke = box["r"]
    attempt.record("external: a long-poll of a moved asker is told allow",
                   woke.status_code == 200 and woke.json()["decision"] == "allow")
    assert woke.status_code == 404 or woke.json()["decision"] == "deny", woke.text
    # Every later use: the token now signs in to the other org (its cache may hold the old
    # answer for a moment).
    wait_for(lambda: httpx.get(f"{srv.url}/api/v1/calls/{gated['call']}",
                            headers=h()).status_code == 404, "the moved asker kept the call")
    uses = {
        "wait": httpx.get(f"{srv.url}/api/v1/calls/{gated['call']}", params={"wait": 1},
                          headers=h()),
        "peek": httpx.get(f"{srv.url}/api/v1/calls/{gated['call']}",
                          params={"peek": "true"}, headers=h()),
        "events": httpx.get(f"{srv.url}/api/v1/calls/{gated['call']}/events", headers=h()),
        "report": httpx.post(f"{srv.url}/api/v1/calls/{allowed['call']}/result",
                             headers=h(), json={"output": "done"}),
        "ask": ask(srv.url, "s-move", "a2", "transfer", {"amount": 5}),
    }
    for use, r in uses.items():
        attempt.record(f"external: a moved asker's {use} of the old org's call",
                       r.status_code != 404)
        assert r.status_code == 404, (use, r.text)
    assert audit_rows(srv, "a1") == []  # the report ran no PostToolUse
