"""The DAG engine and workflows on a real server on loopback: started over HTTP, followed on
the same event stream as any run, and decided by a person over HTTP."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from hookgate.workflows import parse_workflow
from tests.live_server import live_server
from tests.server.demo_world import auth, world
from tests.server.test_api import wait_pending, wait_run
from tests.sse import read_events

pytestmark = pytest.mark.both_databases

PAY = {"amount": 60000, "vendor": "ACME"}


def approve_when_pending(c: httpx.Client, run_id: str) -> list[str]:
    """Follow the run's stream; approve its request when it shows; return the event types."""
    types: list[str] = []
    with c.stream("GET", f"/api/runs/{run_id}/events", headers=auth("alice")) as resp:
        assert resp.status_code == 200
        for ev in read_events(resp):
            if ev.comment:
                continue
            types.append(ev.event)
            if ev.event == "confirmation_pending":
                pending = wait_pending(c)
                r = c.post(f"/api/confirmations/{pending['id']}/respond",
                           json={"decision": "approve"}, headers=auth("alice"))
                assert r.status_code == 200, r.text
    return types


def test_a_dag_run_over_http_waits_for_approval_and_pays_once(database_url: str) -> None:
    turns: list[dict[str, Any]] = [
        {"plan": {"steps": [{"id": "pay", "tool": "oa__purchase_pay", "args": PAY}]}},
        {"answer": "Paid ACME."}]
    deployment, bank = world(database_url, turns=turns)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        r = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay", "engine": "dag"},
                   headers=auth("alice"))
        assert r.status_code == 200, r.text
        run_id = r.json()["run_id"]
        types = approve_when_pending(c, run_id)
        run = wait_run(c, run_id)

    assert run["status"] == "completed" and run["engine"] == "dag"
    assert bank.payments == [{"amount": 60000.0, "vendor": "ACME"}]
    assert types.index("plan") < types.index("confirmation_pending") < types.index(
        "tool_result") < types.index("step_result") < types.index("done")


def test_a_workflow_run_over_http_streams_like_a_run_and_its_payment_waits_for_a_person(
        database_url: str) -> None:
    deployment, bank = world(database_url)
    workflow = parse_workflow({"id": "settle", "as_agent": "buyer", "nodes": [
        {"id": "pay", "type": "tool", "tool": "oa__purchase_pay", "args": PAY}]})
    deployment.workflows = {"settle": workflow}
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        assert [w["id"] for w in c.get("/api/workflows", headers=auth("alice")).json()] == [
            "settle"]
        assert c.get("/api/workflows", headers=auth("mallory")).json() == []
        assert c.post("/api/workflows/settle/runs", json={},
                      headers=auth("mallory")).status_code == 404
        r = c.post("/api/workflows/settle/runs", json={"message": "month end"},
                   headers=auth("alice"))
        assert r.status_code == 200, r.text
        run_id = r.json()["run_id"]
        types = approve_when_pending(c, run_id)
        run = wait_run(c, run_id)

    assert run["status"] == "completed" and run["engine"] == "workflow"
    assert bank.payments == [{"amount": 60000.0, "vendor": "ACME"}]
    assert types.index("confirmation_pending") < types.index("node_result") < types.index(
        "done")
