"""Authority at the moment of use for decisions and reads: a person moved to another org, or
removed from the configuration, after a request was made (and after they read it) can no
longer decide it, vote on it, make a rule from it, read it or list it, on any path (single,
batch, remember, rules, CLI) — on a real server, SQLite and PostgreSQL. Nothing is taken
from what was true when the request or the reader's connection was made."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from hookgate.approvals.quorum import QuorumRule
from hookgate.runtime.deployment import Deployment
from hookgate.storage.users import sync_declared_users
from tests.live_server import LiveServer, live_server
from tests.portal.steps import WAIT_S
from tests.server.demo_world import TOKENS, auth, world

pytestmark = pytest.mark.both_databases


def _pending(c: httpx.Client, n: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = c.get("/api/confirmations", params={"status": "pending"},
                      headers=auth("alice")).json()
        if len(found) == n:
            return sorted(found, key=lambda r: r["tool_call_id"])
        time.sleep(0.05)
    raise AssertionError(f"{n} pending requests did not appear")


def _change_bob(srv: LiveServer, deployment: Deployment, how: str) -> None:
    """What a restart with an edited file does to bob: ``moved`` to org Other, or
    ``removed`` (disabled)."""
    users = [u for u in deployment.users if u.id != "bob"]
    if how == "moved":
        bob = next(u for u in deployment.users if u.id == "bob")
        users.append(dataclasses.replace(bob, org="other"))
    srv.call(sync_declared_users(srv.runtime.db, users))


@pytest.mark.parametrize("how", ["moved", "removed"])
def test_a_person_moved_or_removed_decides_and_reads_nothing_of_the_old_org(
        database_url: str, how: str) -> None:
    turns = [{"tool_calls": [
        {"id": "big", "name": "oa__purchase_pay", "args": {"amount": 600000, "vendor": "A"}},
        {"id": "p2", "name": "oa__purchase_pay", "args": {"amount": 70000, "vendor": "B"}},
    ]}, {"answer": "done"}]
    deployment, bank = world(database_url, turns=turns, scope="org_members")
    deployment = dataclasses.replace(deployment, agents={"buyer": dataclasses.replace(
        deployment.agents["buyer"], approval_quorum=(QuorumRule.parse(
            "oa__purchase_pay", "args.amount > 500000", 2, None),))})
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
               headers=auth("alice")).raise_for_status()
        big, p2 = _pending(c, 2)
        # bob reads both and votes on the big one while he is a member.
        assert c.get(f"/api/confirmations/{p2['id']}", headers=auth("bob")).json()[
            "can_decide"] is True
        voted = c.post(f"/api/confirmations/{big['id']}/respond",
                       json={"decision": "approve"}, headers=auth("bob"))
        assert voted.json()["approvals"]["count"] == 1, voted.text

        _change_bob(srv, deployment, how)
        gone = 404 if how == "moved" else 401

        def respond(rid: str, **extra: Any) -> httpx.Response:
            return c.post(f"/api/confirmations/{rid}/respond",
                          json={"decision": "approve", **extra}, headers=auth("bob"))

        # Read first: the leak a remembered sign-in would give is the request itself.
        assert c.get(f"/api/confirmations/{p2['id']}",
                     headers=auth("bob")).status_code == gone
        listed = c.get("/api/confirmations", headers=auth("bob"))
        assert listed.status_code == gone or listed.json() == []
        assert respond(p2["id"]).status_code == gone
        assert respond(p2["id"], remember={"scope": "org"}).status_code == gone
        batch = c.post("/api/confirmations/batch", headers=auth("bob"),
                       json={"ids": [p2["id"]], "decision": "approve"})
        if how == "moved":
            assert [i["status_code"] for i in batch.json()["results"]] == [404]
        else:
            assert batch.status_code == 401
        rule = c.post("/api/approval-rules", headers=auth("bob"), json={
            "agent_id": "buyer", "tool_name": "oa__purchase_pay", "scope": "org"})
        assert rule.status_code == gone
        cli = subprocess.run(
            [sys.executable, "-m", "hookgate.cli.main", "approvals", "approve", p2["id"],
             "--url", srv.url, "--token", TOKENS["bob"]], capture_output=True, text=True,
            timeout=60)
        assert cli.returncode != 0

        # His earlier vote no longer counts: olivia's alone is one of two.
        shown = c.get(f"/api/confirmations/{big['id']}", headers=auth("alice")).json()
        assert shown["approvals"]["count"] == 0
        after = c.post(f"/api/confirmations/{big['id']}/respond",
                       json={"decision": "approve"}, headers=auth("olivia")).json()
        assert after["status"] == "pending", after
        assert [r["status"] for r in _pending(c, 2)] == ["pending", "pending"]
        assert bank.payments == []


def test_the_inbox_stream_shows_a_moved_person_no_request_made_after_the_move(
        database_url: str) -> None:
    from tests.server.test_stream_access import OpenStream, paying, pending_for, start_run

    deployment, vendor, _bank = paying(database_url)
    with live_server(deployment, access_recheck_s=60) as srv, \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        stream = OpenStream(f"{srv.url}/api/confirmations/events", auth("bob"))
        start_run(c, vendor, "Before")
        pending_for(c, "Before")
        deadline = time.monotonic() + WAIT_S
        while "Before" not in stream.text and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "Before" in stream.text
        # bob's token is fresh in the token cache; the file moves him; a request follows.
        assert c.get("/api/runs", headers=auth("bob")).status_code == 200
        _change_bob(srv, deployment, "moved")
        start_run(c, vendor, "After")
        pending_for(c, "After")
        assert stream.ended.wait(WAIT_S), "the stream did not end"
        assert "After" not in stream.text
        stream.close()
