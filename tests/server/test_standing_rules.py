"""Standing rules through a real server: "approve and remember" from a decision and rules
created directly; a match approves without a request, and every use is on the run's trace,
its events and the audit log as "approved by rule R, created by alice". Another agent, an
expired or revoked rule, a constraint that fails or errs, and look-alike names all ask."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from hookgate import Agent
from tests.live_server import live_server
from tests.portal.steps import WAIT_S, wait_finished
from tests.server.demo_world import TOKENS, auth, world

WHEN = 'args.vendor == "ACME" and args.amount <= 80000'


def _pay(call_id: str, amount: int, vendor: str = "ACME") -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": "oa__purchase_pay",
                            "args": {"amount": amount, "vendor": vendor}}]}


def _audited(agent: Agent) -> Agent:
    return dataclasses.replace(agent, model_config_json={"hooks": {"class_hooks": ["audit_log"]}})


def _requests(c: httpx.Client, user: str = "alice") -> list[dict[str, Any]]:
    return list(c.get("/api/confirmations", headers=auth(user)).json())


def _next_pending(c: httpx.Client, seen: int) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        every = _requests(c)
        pending = [r for r in every if r["status"] == "pending"]
        if pending and len(every) == seen + 1:
            return pending[0]
        time.sleep(0.05)
    raise AssertionError(f"request {seen + 1} did not appear; requests: {_requests(c)}")


def _start(c: httpx.Client, agent_id: str = "buyer", user: str = "alice") -> str:
    r = c.post("/api/runs", json={"agent_id": agent_id, "message": "pay"}, headers=auth(user))
    assert r.status_code == 200, r.text
    return str(r.json()["run_id"])


def _outcome(c: httpx.Client, run_id: str, call_id: str) -> dict[str, Any]:
    trace = c.get(f"/api/runs/{run_id}", headers=auth("alice")).json()["trace"]
    return next(e for e in trace if e["type"] in ("tool_blocked", "tool_result")
                and e["tool_call_id"] == call_id)


def _rule(c: httpx.Client, user: str = "alice", **body: Any) -> httpx.Response:
    payload = {"agent_id": "buyer", "tool_name": "oa__purchase_pay", **body}
    return c.post("/api/approval-rules", json=payload, headers=auth(user))


@pytest.mark.both_databases
def test_approve_and_remember_approves_later_calls_within_the_constraint_and_audits_each_use(
        database_url: str) -> None:
    turns = [_pay("first", 60000), _pay("second", 70000), _pay("third", 90000),
             _pay("fourth", 75000, vendor="ACME Ltd"), {"answer": "done"}]
    deployment, bank = world(database_url, turns=turns)
    deployment.agents["buyer"] = _audited(deployment.agents["buyer"])
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = _start(c)
        first = _next_pending(c, 0)
        r = c.post(f"/api/confirmations/{first['id']}/respond", headers=auth("alice"), json={
            "decision": "approve", "via": "inbox",
            "remember": {"scope": "agent_user", "expires_in": 3600, "when": WHEN}})
        assert r.status_code == 200, r.text
        rule = r.json()["rule"]
        assert (rule["scope"], rule["user_id"], rule["agent_id"], rule["when"],
                rule["created_by"], rule["from_request_id"], rule["active"]) == (
            "agent_user", "alice", "buyer", WHEN, "alice", first["id"], True)
        # 70,000 to ACME is within the rule: no request. 90,000 is not: a person is asked.
        third = _next_pending(c, 1)
        assert third["payload"]["args"] == {"amount": 90000, "vendor": "ACME"}
        c.post(f"/api/confirmations/{third['id']}/respond", json={"decision": "reject"},
               headers=auth("alice")).raise_for_status()
        fourth = _next_pending(c, 2)  # another vendor is not covered either
        c.post(f"/api/confirmations/{fourth['id']}/respond", json={"decision": "reject"},
               headers=auth("alice")).raise_for_status()
        assert wait_finished(c, run_id) == "completed"

        assert bank.payments == [{"amount": 60000.0, "vendor": "ACME"},
                                 {"amount": 70000.0, "vendor": "ACME"}]
        assert [r["tool_call_id"] for r in _requests(c)] == ["fourth", "third", "first"]
        used = f"approved by rule {rule['id']}, created by alice"
        second = _outcome(c, run_id, "second")
        assert second["allowed"] is True
        assert f"approval_gate: {used}" in second["side_effects"]
        events = c.get(f"/api/runs/{run_id}", headers=auth("alice")).json()["trace"]
        by_rule = [e for e in events if e["type"] == "confirmation_resolved"
                   and e.get("rule_id") == rule["id"]]
        assert [(e["tool_call_id"], e["status"], e["decided_by"], e["reason"])
                for e in by_rule] == [("second", "approved", "alice", used)]
        audit = c.get("/api/audit", params={"tool": "oa__purchase_pay", "outcome": "ok"},
                      headers=auth("alice")).json()["items"]
        assert {(a["tool_call_id"], a["detail"]) for a in audit} == {
            ("first", None), ("second", used)}
        listed = c.get("/api/approval-rules", headers=auth("alice")).json()
        assert [(x["id"], x["uses"]) for x in listed] == [(rule["id"], 1)]


@pytest.mark.both_databases
def test_revoked_expired_other_agent_and_other_user_rules_never_match(
        database_url: str) -> None:
    turns = [_pay("a", 60000), {"answer": "done"}]
    deployment, bank = world(database_url, turns=turns, scope="org_members")
    buyer = deployment.agents["buyer"]
    deployment.agents["seller"] = dataclasses.replace(buyer, id="seller", name="Seller")
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        revoked = _rule(c, scope="org").json()
        # Under org_members bob could have made this rule, so he may revoke it.
        r = c.delete(f"/api/approval-rules/{revoked['id']}", headers=auth("bob"))
        assert r.status_code == 200, r.text
        assert (r.json()["revoked_by"], r.json()["active"]) == ("bob", False)
        assert c.delete(f"/api/approval-rules/{revoked['id']}",
                        headers=auth("mallory")).status_code == 404
        expired = _rule(c, scope="org", expires_in=1).json()
        for_bob = _rule(c, scope="agent_user", user_id="bob").json()
        # A rule for the seller agent, created by alice, is not the buyer's.
        seller = c.post("/api/approval-rules", headers=auth("alice"), json={
            "agent_id": "seller", "tool_name": "oa__purchase_pay", "scope": "org"}).json()
        time.sleep(1.2)
        active = c.get("/api/approval-rules", params={"active": "true"},
                       headers=auth("alice")).json()
        assert {x["id"] for x in active} == {for_bob["id"], seller["id"]}
        assert expired["id"] not in {x["id"] for x in active}

        run_id = _start(c)  # alice's buyer run: no rule covers it
        pending = _next_pending(c, 0)
        assert pending["tool_call_id"] == "a"
        c.post(f"/api/confirmations/{pending['id']}/respond", json={"decision": "reject"},
               headers=auth("alice")).raise_for_status()
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == []
        uses = {x["id"]: x["uses"] for x in c.get("/api/approval-rules",
                                                   headers=auth("alice")).json()}
        assert uses == {revoked["id"]: 0, expired["id"]: 0, for_bob["id"]: 0,
                        seller["id"]: 0}


def test_constraints_that_fail_err_or_are_not_a_plain_true_ask_a_person(
        database_url: str) -> None:
    turns = [_pay("a", 60000), {"answer": "done"}]
    deployment, bank = world(database_url, turns=turns)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        made = [_rule(c, scope="agent_user", user_id="alice", when=w)
                for w in ("args.missing > 1",         # no such argument: an error
                          "args.vendor > 5",          # a string against a number: an error
                          "args.vendor",              # a string, not a True
                          "args.amount <= 50000")]    # false for 60,000
        assert [r.status_code for r in made] == [201] * 4, [r.text for r in made]
        run_id = _start(c)
        pending = _next_pending(c, 0)
        c.post(f"/api/confirmations/{pending['id']}/respond", json={"decision": "reject"},
               headers=auth("alice")).raise_for_status()
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == []


def test_who_may_create_a_rule_and_what_a_rule_may_name(database_url: str) -> None:
    deployment, _bank = world(database_url)  # approver scope: initiator
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        # Look-alike tool names: a trailing space, a Cyrillic 'о', another case.
        for name in ("oa__purchase_pay ", "\u043ea__purchase_pay", "OA__purchase_pay"):
            r = _rule(c, scope="agent_user", user_id="alice", tool_name=name)
            assert r.status_code == 422 and "has no tool" in r.json()["error"], r.text
        # Under 'initiator', bob cannot approve alice's calls, so he cannot pre-approve them,
        # and nobody can approve every user's.
        r = _rule(c, "bob", scope="agent_user", user_id="alice")
        assert r.status_code == 403 and "may not create this rule" in r.json()["error"]
        r = _rule(c, scope="org")
        assert r.status_code == 403, r.text
        assert _rule(c, scope="agent_user", user_id="alice").status_code == 201
        # Another org's user sees no such agent; a bad constraint is refused, never run.
        assert _rule(c, "mallory", scope="agent_user", user_id="mallory").status_code == 404
        r = _rule(c, scope="agent_user", user_id="alice", when="__import__('os')")
        assert r.status_code == 422, r.text
        r = _rule(c, scope="agent_user", user_id="alice", when="args.amount < 1 or")
        assert r.status_code == 422, r.text
        r = _rule(c, scope="run", run_id="run_nope")
        assert r.status_code == 422 and "no run" in r.json()["error"]
        assert _rule(c, scope="agent_user").status_code == 422  # whose calls?
        assert c.get("/api/approval-rules", headers=auth("mallory")).json() == []
        rules = c.get("/api/approval-rules", headers=auth("alice")).json()
        assert len(rules) == 1
        assert c.delete(f"/api/approval-rules/{rules[0]['id']}",
                        headers=auth("mallory")).status_code == 404
        # bob neither made it nor could have, and is no admin: he may not revoke it.
        r = c.delete(f"/api/approval-rules/{rules[0]['id']}", headers=auth("bob"))
        assert r.status_code == 403, r.text
        assert c.get(f"/api/approval-rules/{rules[0]['id']}",
                     headers=auth("alice")).json()["active"] is True


def test_remember_goes_with_an_approval_and_a_refused_rule_leaves_the_request_pending(
        database_url: str) -> None:
    deployment, bank = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = _start(c)
        pending = _next_pending(c, 0)
        url = f"/api/confirmations/{pending['id']}/respond"
        r = c.post(url, headers=auth("alice"), json={
            "decision": "reject", "remember": {"scope": "run"}})
        assert r.status_code == 422, r.text
        r = c.post(url, headers=auth("alice"), json={
            "decision": "approve", "remember": {"scope": "org"}})
        assert r.status_code == 403, r.text
        r = c.post(url, headers=auth("alice"), json={
            "decision": "approve", "remember": {"scope": "run", "when": "args.amount <"}})
        assert r.status_code == 422, r.text
        assert c.get(f"/api/confirmations/{pending['id']}",
                     headers=auth("alice")).json()["status"] == "pending"
        assert c.get("/api/approval-rules", headers=auth("alice")).json() == []
        r = c.post(url, headers=auth("alice"), json={
            "decision": "approve", "remember": {"scope": "run"}})
        assert r.status_code == 200, r.text
        assert (r.json()["rule"]["scope"], r.json()["rule"]["run_id"]) == ("run", run_id)
        assert wait_finished(c, run_id) == "completed"
        assert len(bank.payments) == 1


def _cli(srv_url: str, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookgate.cli.main", *args, "--url", srv_url,
         "--token", TOKENS[user]], capture_output=True, text=True, timeout=60)


def test_the_cli_remembers_lists_creates_and_revokes_rules(database_url: str) -> None:
    turns = [_pay("first", 60000), _pay("second", 61000), {"answer": "done"}]
    deployment, bank = world(database_url, turns=turns)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = _start(c)
        first = _next_pending(c, 0)
        done = _cli(srv.url, "alice", "approvals", "approve", first["id"], "--remember", "run",
                    "--when", "args.amount < 70000", "--expires-in", "600")
        assert done.returncode == 0, done.stderr
        flat = " ".join(done.stdout.split())
        assert "approved by alice via cli" in flat
        assert "remembered: ar_" in flat and f"run {run_id}" in flat
        assert "when args.amount < 70000" in flat
        assert wait_finished(c, run_id) == "completed"
        assert len(bank.payments) == 2  # the second call was approved by the rule

        made = _cli(srv.url, "alice", "rules", "create", "--agent", "buyer",
                    "--tool", "oa__purchase_pay", "--scope", "agent_user", "--user", "alice",
                    "--when", "args.vendor == 'ACME'")
        assert made.returncode == 0, made.stderr
        rule_id = made.stdout.split()[0]
        listed = " ".join(_cli(srv.url, "alice", "rules", "list").stdout.split())
        assert rule_id in listed and "used 1 time" in listed and "user alice" in listed
        refused = _cli(srv.url, "bob", "rules", "revoke", rule_id)
        assert refused.returncode != 0 and "403" in refused.stderr + refused.stdout
        revoked = _cli(srv.url, "alice", "rules", "revoke", rule_id)
        assert revoked.returncode == 0 and f"{rule_id}: revoked by alice" in revoked.stdout
        active = _cli(srv.url, "alice", "rules", "list").stdout
        assert rule_id not in active
        assert rule_id in _cli(srv.url, "alice", "rules", "list", "--all").stdout
        bad = _cli(srv.url, "alice", "rules", "create", "--agent", "buyer", "--tool",
                   "oa__purchase_pay", "--scope", "org")
        assert bad.returncode != 0 and "may not create this rule" in bad.stderr + bad.stdout


@pytest.mark.both_databases
def test_a_run_that_resumes_counts_a_rule_use_once(database_url: str) -> None:
    # One turn: a call the rule covers, then one it does not. The run waits on the second;
    # when it goes on, the first call is not asked again — the same use, not a second one.
    # A turn's calls run concurrently, so the two payments may land in either order.
    turns = [{"tool_calls": [_pay("covered", 60000)["tool_calls"][0],
                             _pay("asked", 90000)["tool_calls"][0]]}, {"answer": "done"}]
    deployment, bank = world(database_url, turns=turns)
    deployment.agents["buyer"] = _audited(deployment.agents["buyer"])
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        made = _rule(c, scope="agent_user", user_id="alice", when=WHEN)
        assert made.status_code == 201, made.text
        rule_id = made.json()["id"]
        run_id = _start(c)
        asked = _next_pending(c, 0)
        assert asked["tool_call_id"] == "asked"
        c.post(f"/api/confirmations/{asked['id']}/respond", json={"decision": "approve"},
               headers=auth("alice")).raise_for_status()
        assert wait_finished(c, run_id) == "completed"
        assert sorted(bank.payments, key=lambda p: p["amount"]) == [
            {"amount": 60000.0, "vendor": "ACME"}, {"amount": 90000.0, "vendor": "ACME"}]
        used = f"approved by rule {rule_id}, created by alice"
        events = c.get(f"/api/runs/{run_id}", headers=auth("alice")).json()["trace"]
        by_rule = [(e["tool_call_id"], e["request_id"]) for e in events
                   if e["type"] == "confirmation_resolved" and e.get("rule_id") == rule_id]
        assert by_rule == [("covered", f"{rule_id}#1")], by_rule
        assert _outcome(c, run_id, "covered")["allowed"] is True
        assert f"approval_gate: {used}" in _outcome(c, run_id, "covered")["side_effects"]
        listed = c.get("/api/approval-rules", headers=auth("alice")).json()
        assert [(x["id"], x["uses"]) for x in listed] == [(rule_id, 1)]
