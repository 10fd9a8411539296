"""No retry around a rejection, through a real server: once a person rejected a call, the
same tool with the same arguments in the same run is refused without a new request (the
model is told why); other arguments, or an agent that opts out, are asked again."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import httpx
import pytest

from tests.live_server import live_server
from tests.portal.steps import WAIT_S, wait_finished
from tests.server.demo_world import auth, world

PAY = {"amount": 60000, "vendor": "ACME"}
TURNS: list[dict[str, Any]] = [
    {"tool_calls": [{"id": "first", "name": "oa__purchase_pay", "args": PAY}]},
    {"tool_calls": [{"id": "again", "name": "oa__purchase_pay", "args": PAY}]},
    {"tool_calls": [{"id": "other", "name": "oa__purchase_pay",
                     "args": {"amount": 55000, "vendor": "ACME"}}]},
    {"answer": "done"},
]


def _requests(c: httpx.Client) -> list[dict[str, Any]]:
    return list(c.get("/api/confirmations", headers=auth("alice")).json())


def _decide_next(c: httpx.Client, seen: int, decision: str) -> dict[str, Any]:
    """Wait for the request number ``seen + 1`` to be pending, then decide it."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        pending = [r for r in _requests(c) if r["status"] == "pending"]
        if pending and len(_requests(c)) == seen + 1:
            r = c.post(f"/api/confirmations/{pending[0]['id']}/respond",
                       json={"decision": decision, "reason": "not this one"},
                       headers=auth("alice"))
            assert r.status_code == 200, r.text
            return dict(r.json())
        time.sleep(0.05)
    raise AssertionError(f"request {seen + 1} did not appear; requests: {_requests(c)}")


def _outcome(trace: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    return next(e for e in trace if e["type"] in ("tool_blocked", "tool_result")
                and e["tool_call_id"] == call_id)


@pytest.mark.both_databases
def test_the_same_rejected_call_is_refused_without_asking_and_the_model_is_told(
        database_url: str) -> None:
    deployment, bank = world(database_url, turns=TURNS)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
                        headers=auth("alice")).json()["run_id"]
        first = _decide_next(c, 0, "reject")
        _decide_next(c, 1, "approve")  # the call with other arguments is asked for
        assert wait_finished(c, run_id) == "completed"

        requests = _requests(c)
        assert [(r["tool_call_id"], r["status"]) for r in requests] == [
            ("other", "approved"), ("first", "rejected")]
        run = c.get(f"/api/runs/{run_id}", headers=auth("alice")).json()
        again = _outcome(run["trace"], "again")
        assert again["allowed"] is False and again["blocked_by"] == "approval_gate"
        assert again["observation"] == (
            "Refused without asking again: 'oa__purchase_pay' with these exact arguments was "
            f"already rejected by alice in this run (request {first['id']}): not this one. "
            "The call did not run; do not retry it.")
        # What the model read is that observation.
        state = srv.call(srv.runtime.runs.store.load(run_id))
        told = [m["content"] for m in state.messages
                if m.get("role") == "tool" and m.get("tool_call_id") == "again"]
        assert told == [again["observation"]]
        assert bank.payments == [{"amount": 55000.0, "vendor": "ACME"}]


def test_an_agent_that_opts_out_is_asked_again(database_url: str) -> None:
    deployment, bank = world(database_url, turns=TURNS)
    agent = deployment.agents["buyer"]
    deployment.agents["buyer"] = dataclasses.replace(agent, refuse_retry_after_rejection=False)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
                        headers=auth("alice")).json()["run_id"]
        _decide_next(c, 0, "reject")
        _decide_next(c, 1, "reject")  # asked again for the same call
        _decide_next(c, 2, "reject")
        assert wait_finished(c, run_id) == "completed"
        assert [r["tool_call_id"] for r in _requests(c)] == ["other", "again", "first"]
        assert bank.payments == []
