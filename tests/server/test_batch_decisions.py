"""Batch decisions through a real server: the parallel gated calls of one turn are decided
together, each still checked on its own (org, eligibility, first decision wins), and the
answer says what became of each request."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.live_server import live_server
from tests.portal.steps import WAIT_S, start_run, wait_finished
from tests.server.demo_world import auth, world

TURN: list[dict[str, Any]] = [
    {"tool_calls": [
        {"id": "p1", "name": "oa__purchase_pay", "args": {"amount": 60000, "vendor": "ACME"}},
        {"id": "p2", "name": "oa__purchase_pay", "args": {"amount": 70000, "vendor": "Initech"}},
        {"id": "p3", "name": "oa__purchase_pay", "args": {"amount": 80000, "vendor": "Hooli"}},
    ]},
    {"answer": "done"},
]


def pending_of(c: httpx.Client, n: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        pending = c.get("/api/confirmations", params={"status": "pending"},
                        headers=auth("alice")).json()
        if len(pending) == n:
            return sorted(pending, key=lambda r: r["tool_call_id"])
        time.sleep(0.05)
    raise AssertionError(f"{n} pending requests did not appear")


@pytest.mark.both_databases
def test_the_parallel_calls_of_a_turn_are_decided_together(database_url: str) -> None:
    deployment, bank = world(database_url, turns=TURN)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c)
        p1, p2, p3 = pending_of(c, 3)
        # One of them was decided first, elsewhere: the batch does not decide it again.
        first = c.post(f"/api/confirmations/{p3['id']}/respond", json={"decision": "reject"},
                       headers=auth("alice"))
        assert first.status_code == 200
        r = c.post("/api/confirmations/batch", headers=auth("alice"), json={
            "ids": [p1["id"], p2["id"], p3["id"], "cr_nosuchrequest"],
            "decision": "approve", "via": "inbox", "message": "approved together"})
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["decided"] == 2
        codes = [(item["id"], item["status_code"]) for item in out["results"]]
        assert codes == [(p1["id"], 200), (p2["id"], 200), (p3["id"], 409),
                         ("cr_nosuchrequest", 404)]
        assert out["results"][2]["request"]["status"] == "rejected"
        assert "already decided: rejected" in out["results"][2]["error"]
        for item in out["results"][:2]:
            assert item["request"]["status"] == "approved"
            assert item["request"]["decision"]["via"] == "inbox"
            assert item["request"]["decision"]["message"] == "approved together"
        assert wait_finished(c, run_id) == "completed"
        assert sorted(p["vendor"] for p in bank.payments) == ["ACME", "Initech"]


def test_each_request_of_a_batch_is_checked_for_its_approver(database_url: str) -> None:
    deployment, bank = world(database_url, turns=TURN)  # the initiator decides
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c)
        ids = [r["id"] for r in pending_of(c, 3)]
        body = {"ids": ids, "decision": "approve"}
        bob = c.post("/api/confirmations/batch", json=body, headers=auth("bob")).json()
        assert bob["decided"] == 0
        assert {item["status_code"] for item in bob["results"]} == {403}
        mallory = c.post("/api/confirmations/batch", json=body,
                         headers=auth("mallory")).json()
        assert {item["status_code"] for item in mallory["results"]} == {404}
        assert "request" not in mallory["results"][0]  # nothing of another org is shown
        assert len(pending_of(c, 3)) == 3 and bank.payments == []

        twice = c.post("/api/confirmations/batch", headers=auth("alice"),
                       json={"ids": [ids[0], ids[0]], "decision": "reject"})
        assert twice.status_code == 422 and "distinct" in twice.text
        edits = c.post("/api/confirmations/batch", headers=auth("alice"), json={
            "ids": ids, "decision": "approve", "arguments": {"amount": 1}})
        assert edits.status_code == 422  # an edit is for one request, never a batch
        too_many = c.post("/api/confirmations/batch", headers=auth("alice"),
                          json={"ids": [f"cr_{i}" for i in range(101)], "decision": "reject"})
        assert too_many.status_code == 422

        done = c.post("/api/confirmations/batch", headers=auth("alice"),
                      json={"ids": ids, "decision": "reject", "reason": "not this quarter"})
        assert done.json()["decided"] == 3
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == []


@pytest.mark.both_databases
def test_decisions_in_quick_succession_are_all_kept(database_url: str) -> None:
    # On PostgreSQL the second and third decision find the run's continuation already
    # queued; each decision must still commit (it once was silently rolled back, leaving
    # the request pending and the run waiting for ever).
    deployment, bank = world(database_url, turns=TURN)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c)
        requests = pending_of(c, 3)
        for request, decision in zip(requests, ("approve", "approve", "reject"), strict=True):
            r = c.post(f"/api/confirmations/{request['id']}/respond",
                       json={"decision": decision}, headers=auth("alice"))
            assert r.status_code == 200, r.text
        assert wait_finished(c, run_id) == "completed"
        statuses = [c.get(f"/api/confirmations/{r['id']}", headers=auth("alice")).json()["status"]
                    for r in requests]
        assert statuses == ["approved", "approved", "rejected"]
        assert sorted(p["vendor"] for p in bank.payments) == ["ACME", "Initech"]
