"""``GET /api/audit``: the caller's org's rows only, newest first, page by page, filtered by
agent, user, tool, outcome and time — served by a real server on loopback."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.hooks_builtin.server_world import auth, deployment
from tests.hooks_builtin.world import OA, call
from tests.live_server import live_server

pytestmark = pytest.mark.both_databases
TURNS = [call("oa__purchase_pay", amount=100, vendor="ACME"), call("crm__lookup", customer="G")]


def run_as(c: httpx.Client, user: str, agent_id: str) -> None:
    r = c.post("/api/runs", json={"agent_id": agent_id, "message": "go"}, headers=auth(user))
    assert r.status_code == 200, r.text
    run_id = r.json()["run_id"]
    deadline = time.monotonic() + 20
    while c.get(f"/api/runs/{run_id}", headers=auth(user)).json()["status"] == "running":
        assert time.monotonic() < deadline, "the run did not finish"
        time.sleep(0.05)


def audit(c: httpx.Client, user: str = "alice", **params: Any) -> dict[str, Any]:
    r = c.get("/api/audit", params=params, headers=auth(user))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def test_the_audit_api_shows_the_callers_org_page_by_page_and_filtered(
        database_url: str) -> None:
    with live_server(deployment(database_url, OA(), TURNS)) as srv, \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        run_as(c, "alice", "buyer")
        run_as(c, "bob", "clerk")
        run_as(c, "mallory", "rival")
        assert c.put("/api/orgs/acme/read_only", json={"read_only": True},
                     headers=auth("alice")).status_code == 200
        run_as(c, "alice", "buyer")  # the payment is blocked, the lookup runs

        everything = audit(c, limit=500)["items"]
        assert len(everything) == 6 and {r["org_id"] for r in everything} == {"acme"}
        assert [r["id"] for r in everything] == sorted((r["id"] for r in everything),
                                                       reverse=True)
        assert everything[0]["args"] == {"customer": "G"}
        assert set(everything[0]) >= {"tool_name", "connector", "agent_id", "user_id",
                                      "run_id", "tool_call_id", "outcome", "blocked_by",
                                      "result_chars", "result_sha256", "latency_us",
                                      "execution_path", "created_at", "seq", "row_hash"}
        theirs = audit(c, "mallory")["items"]
        assert [(r["org_id"], r["agent_id"]) for r in theirs] == [("other", "rival")] * 2

        pages, before = [], None
        while True:
            page = audit(c, limit=4, **({"before": before} if before else {}))
            pages.append([r["id"] for r in page["items"]])
            before = page["next_before"]
            if before is None:
                break
        assert [len(p) for p in pages] == [4, 2]
        assert [i for p in pages for i in p] == [r["id"] for r in everything]

        assert {r["agent_id"] for r in audit(c, agent_id="clerk")["items"]} == {"clerk"}
        assert len(audit(c, agent_id="clerk")["items"]) == 2
        assert {r["user_id"] for r in audit(c, user_id="bob")["items"]} == {"bob"}
        assert len(audit(c, tool="crm__lookup")["items"]) == 3
        (blocked,) = audit(c, outcome="blocked")["items"]
        assert blocked["blocked_by"] == "readonly_guard"
        assert blocked["detail"] == "Org is in read-only mode — write blocked."
        assert audit(c, agent_id="rival")["items"] == []  # another org's agent: nothing

        now = datetime.now(UTC)
        assert len(audit(c, since=(now - timedelta(minutes=5)).isoformat())["items"]) == 6
        assert audit(c, since=(now + timedelta(minutes=5)).isoformat())["items"] == []
        assert audit(c, until=(now - timedelta(minutes=5)).isoformat())["items"] == []
        naive = (now + timedelta(minutes=5)).replace(tzinfo=None).isoformat()
        assert len(audit(c, until=naive)["items"]) == 6  # a time without a zone is UTC

        assert c.get("/api/audit").status_code == 401
        bad = c.get("/api/audit", params={"outcome": "maybe"}, headers=auth("alice"))
        assert bad.status_code == 422 and "outcome must be one of" in bad.json()["error"]
