"""The coding-agent routes on two real `hookgate serve` processes over one PostgreSQL: a call
asked on one instance and approved on the other runs once when the agent retries it on both
at once, another call of the session gets no share of that approval, and a report sent to
both instances runs PostToolUse once."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.instances import Instance

TOKEN = "tok-alice-coder"
CONFIG = """
database: {database}
orgs: [{{id: acme, name: ACME}}]
users:
  - {{id: alice, org: acme, admin: true, token: {token}}}
models: {{none: {{type: scripted, turns: [{{answer: "-"}}]}}}}
agents:
  - id: coder
    org: acme
    owner: alice
    model: none
    model_config_json:
      hooks: {{class_hooks: [audit_log]}}
      claude_code:
        wait_s: 0.3
        rules:
          - {{matcher: Bash, when: '".log" in args.command', requires_confirmation: true,
              reason: log files are shared}}
"""

ROUTES = {"codex": "/api/codex/hooks", "gemini": "/api/gemini/hooks"}
H = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, postgres_server_url: str,
         postgres_template: str) -> Iterator[tuple[Instance, Instance]]:
    from tests.conftest import _fresh_pg_database

    workdir: Path = tmp_path_factory.mktemp("coding-pair")
    config = workdir / "hookgate.yaml"
    config.write_text(CONFIG.format(
        database=_fresh_pg_database(postgres_server_url, postgres_template), token=TOKEN))
    a, b = Instance("a", config, workdir), Instance("b", config, workdir)
    try:
        for inst in (a, b):
            inst.spawn()
        for inst in (a, b):
            inst.wait_up()
        yield a, b
    finally:
        for inst in (a, b):
            inst.stop()


def hook_input(agent: str, event: str, session: str, command: str, call: str,
               **extra: Any) -> dict[str, Any]:
    """The agent's own hook input for one shell call (Codex: a tool_use_id; Gemini: the
    timestamp from which hookgate derives the call's id)."""
    if agent == "codex":
        return {"hook_event_name": event, "session_id": session, "cwd": "/work/repo",
                "tool_name": "exec_command", "tool_input": {"cmd": command},
                "tool_use_id": call, **extra}
    gemini_event = {"PreToolUse": "BeforeTool", "PostToolUse": "AfterTool"}[event]
    return {"hook_event_name": gemini_event, "session_id": session, "cwd": "/work/repo",
            "timestamp": f"2026-12-06T07:00:0{call[-1]}.000Z",
            "tool_name": "run_shell_command", "tool_input": {"command": command}, **extra}


def send(inst: Instance, agent: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{inst.url}{ROUTES[agent]}", params={"agent": "coder"}, json=body,
                      headers=H, timeout=30)


def allowed(agent: str, r: httpx.Response) -> bool:
    """What the agent reads as "run it": Codex an empty object, Gemini any 2xx without a deny."""
    return r.status_code == 200 and '"deny"' not in r.text and '"block"' not in r.text


def pending_request(r: httpx.Response) -> str:
    """The id of the request the refusal names (every agent's deny carries it)."""
    assert r.status_code in (200, 403), r.text
    assert "pending" in r.text, r.text
    found = re.search(r"cr_[0-9a-f]+", r.text)
    assert found, r.text
    return found.group(0)


def at_once(calls: list[tuple[Instance, dict[str, Any]]], agent: str) -> list[httpx.Response]:
    start = threading.Barrier(len(calls))
    answers: list[httpx.Response | None] = [None] * len(calls)

    def one(i: int, inst: Instance, body: dict[str, Any]) -> None:
        start.wait()
        answers[i] = send(inst, agent, body)

    threads = [threading.Thread(target=one, args=(i, inst, body))
               for i, (inst, body) in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(a is not None for a in answers)
    return [a for a in answers if a is not None]


@pytest.mark.parametrize("agent", sorted(ROUTES))
def test_an_approval_given_on_one_instance_runs_the_retry_once_on_either(
        pair: tuple[Instance, Instance], agent: str, attempt: Any) -> None:
    a, b = pair
    session, command = f"s-{agent}-once", f"echo {agent} >> shared.log"
    body = hook_input(agent, "PreToolUse", session, command, "call_1")
    request_id = pending_request(send(a, agent, body))
    decided = httpx.post(f"{b.url}/api/confirmations/{request_id}/respond", headers=H,
                         json={"decision": "approve"}, timeout=30)
    assert decided.status_code == 200, decided.text
    # The agent's retry reaches both instances at the same moment: one may run it.
    answers = at_once([(a, body), (b, body), (a, body), (b, body)], agent)
    ran = [r for r in answers if allowed(agent, r)]
    attempt.record(f"{agent}: an approved call retried on two instances runs twice",
                   len(ran) > 1)
    assert len(ran) == 1, [r.text for r in answers]
    # A report of the run sent to both instances runs PostToolUse once: one row of the run
    # (the refused retries each have a row of their own, outcome "blocked").
    done = hook_input(agent, "PostToolUse", session, command, "call_1",
                      tool_response="ok")
    assert all(r.status_code == 200 for r in at_once([(a, done), (b, done)], agent))
    rows = [row for row in httpx.get(f"{a.url}/api/audit", headers=H, timeout=30
                                     ).json()["items"]
            if row["session_id"] == session and row["outcome"] == "ok"]
    attempt.record(f"{agent}: one report on two instances runs PostToolUse twice",
                   len(rows) != 1)
    assert len(rows) == 1, rows


@pytest.mark.parametrize("agent", sorted(ROUTES))
def test_another_call_of_the_session_gets_no_share_of_an_approval_made_elsewhere(
        pair: tuple[Instance, Instance], agent: str, attempt: Any) -> None:
    a, b = pair
    session = f"s-{agent}-other"
    first = hook_input(agent, "PreToolUse", session, "echo 1 >> x.log", "call_1")
    request_id = pending_request(send(a, agent, first))
    assert httpx.post(f"{b.url}/api/confirmations/{request_id}/respond", headers=H,
                      json={"decision": "approve"}, timeout=30).status_code == 200
    # Same session, another call (other id, other command) on the other instance.
    other = hook_input(agent, "PreToolUse", session, "echo 2 >> x.log", "call_2")
    r = send(b, agent, other)
    attempt.record(f"{agent}: another call on the other instance takes the approval",
                   allowed(agent, r))
    assert not allowed(agent, r), r.text
    assert allowed(agent, send(b, agent, first))
