"""Standing rules in shadow mode through a real server: a rule created with ``mode: shadow``
that covers a call never decides it (a person is still asked) and its "would allow" lands
in the audit row's detail; switched to enforce through the API or the CLI (no restart) it
decides the next call; a bad mode is refused, and only the rule's creator or an admin may
switch it (hookgate.approvals.rules: the one owner of what a rule covers)."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from tests.live_server import live_server
from tests.portal.steps import WAIT_S, wait_finished
from tests.server.demo_world import TOKENS, auth, world
from tests.server.test_standing_rules import _audited, _next_pending, _pay, _rule, _start

pytestmark = pytest.mark.both_databases


def _cli(srv_url: str, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookgate.cli.main", *args, "--url", srv_url,
         "--token", TOKENS[user]], capture_output=True, text=True, timeout=60, check=False)


def _audit(c: httpx.Client, count: int) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + WAIT_S
    while True:
        rows = c.get("/api/audit", params={"tool": "oa__purchase_pay", "outcome": "ok"},
                     headers=auth("alice")).json()["items"]
        if len(rows) >= count or time.monotonic() > deadline:
            return {r["tool_call_id"]: r for r in rows}
        time.sleep(0.05)


@pytest.mark.parametrize("switch", ["api", "cli"])
def test_a_shadow_standing_rule_still_asks_records_would_allow_and_enforces_once_switched(
        database_url: str, switch: str) -> None:
    turns = [_pay("first", 60000), _pay("second", 61000), {"answer": "done"}]
    deployment, bank = world(database_url, turns=turns)
    deployment.agents["buyer"] = _audited(deployment.agents["buyer"])
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        r = _rule(c, scope="agent_user", user_id="alice", mode="shadow")
        assert r.status_code == 201, r.text
        rule = r.json()
        assert rule["mode"] == "shadow" and rule["active"] is True, rule
        run_id = _start(c)
        # The shadow rule covers the call, yet a person is asked.
        first = _next_pending(c, 0)
        assert first["tool_call_id"] == "first"
        # Switched to enforce while the first call waits: the next call is the rule's.
        if switch == "api":
            bob = c.patch(f"/api/approval-rules/{rule['id']}", json={"mode": "enforce"},
                          headers=auth("bob"))
            assert bob.status_code == 403, bob.text  # neither its creator nor an admin
            switched = c.patch(f"/api/approval-rules/{rule['id']}", json={"mode": "enforce"},
                               headers=auth("alice"))
            assert switched.status_code == 200, switched.text
            assert switched.json()["mode"] == "enforce"
        else:
            done = _cli(srv.url, "alice", "rules", "mode", rule["id"], "enforce")
            assert done.returncode == 0, done.stdout + done.stderr
            assert rule["id"] in done.stdout and "shadow" not in done.stdout, done.stdout
        c.post(f"/api/confirmations/{first['id']}/respond", json={"decision": "approve"},
               headers=auth("alice")).raise_for_status()
        assert wait_finished(c, run_id) == "completed"
        assert [x["tool_call_id"] for x in c.get(
            "/api/confirmations", headers=auth("alice")).json()] == ["first"]
        rows = _audit(c, 2)
        listed = c.get(f"/api/approval-rules/{rule['id']}", headers=auth("alice")).json()
    assert bank.payments == [{"amount": 60000.0, "vendor": "ACME"},
                             {"amount": 61000.0, "vendor": "ACME"}]
    would = f"shadow standing rule {rule['id']}: would allow (created by alice)"
    assert would in (rows["first"]["detail"] or ""), rows["first"]
    assert rows["second"]["detail"] == f"approved by rule {rule['id']}, created by alice", \
        rows["second"]
    # Only the enforced use counts.
    assert (listed["mode"], listed["uses"]) == ("enforce", 1), listed


def test_a_bad_mode_is_refused_and_a_rule_that_covers_nothing_records_nothing(
        database_url: str) -> None:
    turns = [_pay("first", 90000), {"answer": "done"}]
    deployment, _bank = world(database_url, turns=turns)
    deployment.agents["buyer"] = _audited(deployment.agents["buyer"])
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        bad = _rule(c, scope="agent_user", user_id="alice", mode="observe")
        assert bad.status_code == 422, bad.text
        assert "'mode' must be 'enforce' or 'shadow', got 'observe'" in bad.text, bad.text
        r = _rule(c, scope="agent_user", user_id="alice", mode="shadow",
                  when="args.amount <= 80000")
        assert r.status_code == 201, r.text
        rule = r.json()
        wrong = c.patch(f"/api/approval-rules/{rule['id']}", json={"mode": "observe"},
                        headers=auth("alice"))
        assert wrong.status_code == 422, wrong.text
        run_id = _start(c)
        first = _next_pending(c, 0)
        c.post(f"/api/confirmations/{first['id']}/respond", json={"decision": "approve"},
               headers=auth("alice")).raise_for_status()
        assert wait_finished(c, run_id) == "completed"
        rows = _audit(c, 1)
        # Revoked, a rule cannot be switched back on.
        assert c.delete(f"/api/approval-rules/{rule['id']}",
                        headers=auth("alice")).status_code == 200
        again = c.patch(f"/api/approval-rules/{rule['id']}", json={"mode": "enforce"},
                        headers=auth("alice"))
    assert "shadow" not in (rows["first"]["detail"] or ""), rows["first"]
    assert again.status_code in (403, 422), again.text


def test_a_shadow_rule_beside_an_enforcing_one_is_recorded_and_remember_can_make_one(
        database_url: str) -> None:
    turns = [_pay("first", 60000), _pay("second", 61000), _pay("third", 62000),
             {"answer": "done"}]
    deployment, bank = world(database_url, turns=turns)
    deployment.agents["buyer"] = _audited(deployment.agents["buyer"])
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = _start(c)
        first = _next_pending(c, 0)
        # Approve and remember, in shadow mode: the next call still asks.
        r = c.post(f"/api/confirmations/{first['id']}/respond", headers=auth("alice"), json={
            "decision": "approve", "remember": {"scope": "agent_user", "mode": "shadow"}})
        assert r.status_code == 200, r.text
        remembered = r.json()["rule"]
        assert remembered["mode"] == "shadow", remembered
        second = _next_pending(c, 1)
        assert second["tool_call_id"] == "second"
        assert second["context"]["shadow_rules"] == [{
            "rule": f"standing rule {remembered['id']}", "effect": "allow",
            "why": "created by alice"}], second["context"]
        # An enforcing rule beside it: it decides the third call, and the shadow rule is
        # still evaluated and recorded.
        enforcing = _rule(c, scope="agent_user", user_id="alice")
        assert enforcing.status_code == 201, enforcing.text
        c.post(f"/api/confirmations/{second['id']}/respond", json={"decision": "approve"},
               headers=auth("alice")).raise_for_status()
        assert wait_finished(c, run_id) == "completed"
        rows = _audit(c, 3)
        uses = {x["id"]: x["uses"] for x in c.get("/api/approval-rules",
                                                   headers=auth("alice")).json()}
    assert len(bank.payments) == 3
    would = f"shadow standing rule {remembered['id']}: would allow (created by alice)"
    assert rows["first"]["detail"] is None, rows["first"]
    assert would in (rows["second"]["detail"] or ""), rows["second"]
    third = rows["third"]["detail"] or ""
    assert third.startswith(f"approved by rule {enforcing.json()['id']}, created by alice"), third
    assert would in third, third
    assert uses == {remembered["id"]: 0, enforcing.json()["id"]: 1}, uses


def test_a_shadow_rule_reaches_the_audit_row_of_a_claude_code_call_reported_later(
        database_url: str) -> None:
    # A call that runs elsewhere: its audit row is written when its result is reported,
    # on another context than the one that asked; the would-allow kept with its request
    # reaches it.
    from tests.claude_code.scene import TOKEN, coder
    from tests.claude_code.test_hook_endpoint import PUSH, approve, decision, hook, pending, pre

    deployment = coder(wait_s=0.3)
    deployment.database_url = database_url
    agent = deployment.agents["coder"]
    agent.confirmation_mode = "inline_only"
    agent.approval_channel_id = None
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with live_server(deployment) as srv:
        r = httpx.post(f"{srv.url}/api/approval-rules", headers=headers, json={
            "agent_id": "coder", "tool_name": "Bash", "scope": "agent_user",
            "user_id": "alice", "mode": "shadow"})
        assert r.status_code == 201, r.text
        rule = r.json()
        assert decision(hook(srv, pre("Bash", PUSH, "toolu_sh")))[0] == "deny"
        [request] = pending(srv)
        approve(srv, request["id"])
        assert decision(hook(srv, pre("Bash", PUSH, "toolu_sh")))[0] == "allow"
        done = dict(pre("Bash", PUSH, "toolu_sh"), hook_event_name="PostToolUse",
                    tool_response={"stdout": "", "stderr": "", "interrupted": False},
                    duration_ms=5)
        assert hook(srv, done).status_code == 200
        rows = httpx.get(f"{srv.url}/api/audit", headers=headers).json()["items"]
    [row] = [r for r in rows if r["tool_call_id"] == "toolu_sh" and r["outcome"] == "ok"]
    assert f"shadow standing rule {rule['id']}: would allow (created by alice)" in (
        row["detail"] or ""), row
