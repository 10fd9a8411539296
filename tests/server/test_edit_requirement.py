"""Who must approve is decided on the call that will run, through a real server: an edit
that raises a 60,000 payment to 600,000 (over the two-approver, four-eyes threshold) is
refused with the reason on every route — the respond API, the inbox's edit, the CLI's
``--set`` — and never runs on one approval nor as a self-approval; an edit that lowers it
still runs. Batch decisions count only votes that count now, and a standing rule stops when
its creator's token is revoked, until an admin enables it again (``hookgate rules enable``)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from hookgate.approvals.quorum import QuorumRule
from hookgate.storage.tables import User
from tests.live_server import LiveServer, live_server
from tests.portal.steps import pending_request, start_run, wait_finished
from tests.server.demo_world import TOKENS, auth, world

SMALL = {"amount": 60000, "vendor": "ACME"}
RAISED = {"amount": 600000, "vendor": "ACME"}


def _threshold_world(database_url: str, turns: list[dict[str, Any]] | None = None) -> Any:
    """Above 500,000: two distinct approvers, never the requester."""
    deployment, bank = world(database_url, scope="org_members", turns=turns)
    deployment.agents["buyer"] = dataclasses.replace(
        deployment.agents["buyer"],
        approval_quorum=(QuorumRule.parse("oa__purchase_pay", "args.amount > 500000", 2,
                                          False),))
    return deployment, bank


def _respond(c: httpx.Client, request_id: str, user: str, **body: Any) -> httpx.Response:
    return c.post(f"/api/confirmations/{request_id}/respond",
                  json={"decision": "approve", **body}, headers=auth(user))


def _cli(srv: LiveServer, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args, "--url", srv.url,
                           "--token", TOKENS[user]], capture_output=True, text=True, timeout=60)


def _move(srv: LiveServer, user: str, **values: Any) -> None:
    async def move() -> None:
        async with srv.runtime.db.transaction() as s:
            await s.execute(update(User).where(User.id == user).values(**values))

    srv.call(move())


@pytest.mark.both_databases
def test_edit_that_raises_the_amount_is_refused_on_every_route_and_a_lower_one_runs(
        database_url: str) -> None:
    deployment, bank = _threshold_world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c, "Pay ACME 60000")
        request = pending_request(c)
        assert (request["approvals"]["required"], request["can_edit"]) == (1, True)
        rid = request["id"]
        for user, via in (("bob", "api"), ("alice", "api"), ("bob", "inbox"),
                          ("alice", "inbox")):
            r = _respond(c, rid, user, arguments=RAISED, via=via)
            assert r.status_code == 422, (user, via, r.text)
            assert "the edit raises what this call needs" in r.json()["error"]
            assert "needs 2 distinct approvals" in r.json()["error"]
        for user in ("bob", "alice"):
            out = _cli(srv, user, "approvals", "approve", rid, "--set", "amount=600000")
            assert out.returncode != 0, out.stdout
            assert "the edit raises what this call needs" in " ".join(
                (out.stderr + out.stdout).split())
        # Nothing changed: still pending, no votes, nothing paid.
        record = c.get(f"/api/confirmations/{rid}", headers=auth("alice")).json()
        assert record["status"] == "pending" and record["approvals"]["count"] == 0
        assert record["payload"]["edited_args"] is None
        assert bank.payments == []
        # Lowering the amount (the requirement stays one approval) still works.
        out = _cli(srv, "alice", "approvals", "approve", rid, "--set", "amount=45000")
        assert out.returncode == 0, out.stderr
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == [{"amount": 45000.0, "vendor": "ACME"}]


@pytest.mark.both_databases
def test_batch_decisions_count_only_votes_that_count_now(database_url: str) -> None:
    turns = [{"tool_calls": [{"id": "big", "name": "oa__purchase_pay", "args": RAISED}]},
             {"answer": "done"}]
    deployment, bank = _threshold_world(database_url, turns)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        start_run(c, "pay big")
        rid = pending_request(c)["id"]

        def batch(user: str) -> dict[str, Any]:
            r = c.post("/api/confirmations/batch", headers=auth(user),
                       json={"ids": [rid], "decision": "approve", "via": "inbox"})
            assert r.status_code == 200, r.text
            return dict(r.json()["results"][0])

        assert batch("alice")["status_code"] == 403  # four eyes on the requester
        first = batch("bob")
        assert first["status_code"] == 200 and first["request"]["approvals"]["count"] == 1
        _move(srv, "bob", org_id="other")
        second = batch("olivia")
        assert second["status_code"] == 200, second
        shown = second["request"]
        assert (shown["status"], shown["approvals"]["count"]) == ("pending", 1)
        assert [a["user_id"] for a in shown["approvals"]["approved_by"]] == ["olivia"]
        shown = " ".join(_cli(srv, "alice", "approvals", "show", rid).stdout.split())
        assert "approvals 1 of 2 (olivia)" in shown
        assert bank.payments == []


@pytest.mark.both_databases
def test_a_revoked_token_suspends_its_rules_until_an_admin_enables_them(
        database_url: str) -> None:
    turns = [{"tool_calls": [{"id": "one", "name": "oa__purchase_pay", "args": SMALL}]},
             {"tool_calls": [{"id": "two", "name": "oa__purchase_pay", "args": SMALL}]},
             {"answer": "done"}]
    deployment, bank = _threshold_world(database_url, turns)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        made = c.post("/api/approval-rules", headers=auth("bob"), json={
            "agent_id": "buyer", "tool_name": "oa__purchase_pay", "scope": "org"})
        assert made.status_code == 201, made.text
        rule_id = made.json()["id"]
        r = c.post("/api/users/bob/revoke", headers=auth("alice"))
        assert r.status_code == 200 and r.json()["revoked"] is True, r.text
        rule = c.get(f"/api/approval-rules/{rule_id}", headers=auth("alice")).json()
        assert rule["active"] is False
        assert rule["suspended_reason"] == "the token of its creator 'bob' was revoked by alice"
        listed = _cli(srv, "alice", "rules", "list", "--all")
        assert "suspended" in listed.stdout, listed.stdout

        run_id = start_run(c, "pay twice")
        first = pending_request(c)  # the rule no longer approves: a person is asked
        assert first["tool_call_id"] == "one"
        not_admin = _cli(srv, "olivia", "rules", "enable", rule_id)
        assert not_admin.returncode != 0 and "only an admin" in " ".join(
            (not_admin.stderr + not_admin.stdout).split())
        enabled = _cli(srv, "alice", "rules", "enable", rule_id)
        assert enabled.returncode == 0, enabled.stderr
        assert "active" in enabled.stdout
        assert _respond(c, first["id"], "olivia").status_code == 200
        # The second call is approved by the enabled rule (bob is still an enabled member).
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == [{"amount": 60000.0, "vendor": "ACME"}] * 2
        assert c.get(f"/api/approval-rules/{rule_id}",
                     headers=auth("alice")).json()["uses"] == 1
