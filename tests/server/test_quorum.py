"""Four eyes and quorum through a real server: payments above 500,000 need two distinct
approvers and never their requester; one reject rejects; the record lists every approver;
a standing rule never replaces the quorum."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from hookgate.approvals.quorum import QuorumRule
from tests.live_server import live_server
from tests.portal.steps import WAIT_S, wait_finished
from tests.server.demo_world import TOKENS, auth, world

BIG = {"amount": 600000, "vendor": "ACME"}


def _quorum_world(database_url: str, turns: list[dict[str, Any]]) -> Any:
    deployment, bank = world(database_url, turns=turns, scope="org_members")
    deployment.agents["buyer"] = dataclasses.replace(
        deployment.agents["buyer"], allow_self_approval=False,
        approval_quorum=(QuorumRule.parse("oa__purchase_pay", "args.amount > 500000", 2,
                                          None),))
    return deployment, bank


def _pending(c: httpx.Client, call_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for r in c.get("/api/confirmations", params={"status": "pending"},
                       headers=auth("alice")).json():
            if r["tool_call_id"] == call_id:
                return dict(r)
        time.sleep(0.05)
    raise AssertionError(f"no pending request for {call_id}")


def _cli(url: str, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args, "--url", url,
                           "--token", TOKENS[user]], capture_output=True, text=True, timeout=60)


def _respond(c: httpx.Client, request_id: str, user: str, decision: str = "approve",
             **extra: Any) -> httpx.Response:
    return c.post(f"/api/confirmations/{request_id}/respond",
                  json={"decision": decision, **extra}, headers=auth(user))


@pytest.mark.both_databases
def test_two_distinct_approvers_and_never_the_requester(database_url: str) -> None:
    turns = [{"tool_calls": [{"id": "big", "name": "oa__purchase_pay", "args": BIG}]},
             {"tool_calls": [{"id": "small", "name": "oa__purchase_pay",
                              "args": {"amount": 60000, "vendor": "ACME"}}]},
             {"answer": "done"}]
    deployment, bank = _quorum_world(database_url, turns)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        # A standing rule for the tool exists, made by olivia: it must not stand in for two.
        assert c.post("/api/approval-rules", headers=auth("olivia"), json={
            "agent_id": "buyer", "tool_name": "oa__purchase_pay", "scope": "org"}
        ).status_code == 201
        run_id = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
                        headers=auth("alice")).json()["run_id"]
        req = _pending(c, "big")
        assert (req["approvals"]["required"], req["approvals"]["count"]) == (2, 0)
        assert [r["kind"] for r in req["context"]["reasons"]].count("quorum") == 2
        mine = c.get(f"/api/confirmations/{req['id']}", headers=auth("alice")).json()
        assert (mine["can_decide"], mine["can_approve"]) == (True, False)

        r = _respond(c, req["id"], "alice")
        assert r.status_code == 403 and "four eyes" in r.json()["error"], r.text
        r = _respond(c, req["id"], "bob", via="inbox")
        assert r.status_code == 200, r.text
        assert (r.json()["status"], r.json()["approvals"]["count"]) == ("pending", 1)
        assert c.get(f"/api/confirmations/{req['id']}",
                     headers=auth("bob")).json()["can_decide"] is False
        r = _respond(c, req["id"], "bob")
        assert r.status_code == 409 and "one person counts once" in r.json()["error"]
        r = _respond(c, req["id"], "olivia", remember={"scope": "run"})
        assert r.status_code == 422, r.text  # no rule from a quorum decision
        assert bank.payments == []
        r = _respond(c, req["id"], "olivia", reason="checked the invoice")
        assert r.status_code == 200, r.text
        done = r.json()
        assert done["status"] == "approved" and done["decision"]["responded_by"] == "olivia"
        assert [(a["user_id"], a["via"]) for a in done["approvals"]["approved_by"]] == [
            ("bob", "inbox"), ("olivia", "api")]

        # The small one needs one approval, but still not the requester's (four eyes on
        # the agent); the org rule by olivia covers it (olivia is not the requester).
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == [{"amount": 600000.0, "vendor": "ACME"},
                                 {"amount": 60000.0, "vendor": "ACME"}]
        assert len(c.get("/api/confirmations", headers=auth("alice")).json()) == 1


@pytest.mark.both_databases
def test_one_reject_rejects_after_an_approval(database_url: str) -> None:
    turns = [{"tool_calls": [{"id": "big", "name": "oa__purchase_pay", "args": BIG}]},
             {"answer": "done"}]
    deployment, bank = _quorum_world(database_url, turns)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
                        headers=auth("olivia")).json()["run_id"]
        req = _pending(c, "big")
        voted = _cli(srv.url, "bob", "approvals", "approve", req["id"])
        assert voted.returncode == 0, voted.stderr
        assert f"{req['id']}: approval recorded, 1 of 2 approvals" in voted.stdout
        shown = " ".join(_cli(srv.url, "alice", "approvals", "show", req["id"]).stdout.split())
        assert "approvals 1 of 2 (bob)" in shown
        assert "2 distinct people must approve" in shown
        r = _respond(c, req["id"], "alice", "reject", reason="too much")
        assert r.status_code == 200, r.text
        assert (r.json()["status"], r.json()["decision"]["responded_by"]) == (
            "rejected", "alice")
        assert [a["user_id"] for a in r.json()["approvals"]["approved_by"]] == ["bob"]
        assert _respond(c, req["id"], "olivia", "reject").status_code == 409  # decided
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == []


def test_a_quorum_nobody_could_reach_is_refused_at_declaration() -> None:
    deployment, _bank = world("sqlite+aiosqlite://")
    agent = deployment.agents["buyer"]
    with pytest.raises(ValueError, match="leaves nobody who may approve"):
        dataclasses.replace(agent, allow_self_approval=False)
    with pytest.raises(ValueError, match="needs confirmation_approver_scope 'org_members'"):
        dataclasses.replace(agent, confirmation_approver_scope="agent_owner",
                            approval_quorum=(QuorumRule.parse("*", None, 2, None),))
