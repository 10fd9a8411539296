"""Reading what a run already did through a confirmation request's run_history: another
org's member, look-alike request ids, and a member after an admin-only error text all get
nothing more than the request's own visibility and the trace's admin filter allow."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import httpx
import pytest

from hookgate import ScriptedLLM, tool
from tests.adversarial_tally import Tally
from tests.live_server import live_server
from tests.portal.steps import WAIT_S
from tests.server.demo_world import auth, world

SECRET = "card 4111-1111-1111-1111"


def _pending(c: httpx.Client) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        pending = c.get("/api/confirmations", params={"status": "pending"},
                        headers=auth("alice")).json()
        if pending:
            return pending[0]  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError("no pending request appeared")


@pytest.mark.both_databases
def test_run_history_goes_no_further_than_the_request(database_url: str,
                                                      attempt: Tally) -> None:
    deployment, _bank = world(database_url)

    @tool
    async def oa__lookup_card(vendor: str) -> str:
        """Look up a vendor's card."""
        raise RuntimeError(f"lookup failed for {SECRET}")

    agent = deployment.agents["buyer"]
    deployment.agents["buyer"] = dataclasses.replace(agent,
                                                     tools=[*agent.tools, oa__lookup_card])
    script = [{"tool_calls": [{"name": "oa__lookup_card", "args": {"vendor": "ACME"}}]},
              {"tool_calls": [{"name": "oa__purchase_pay",
                               "args": {"amount": 60000, "vendor": "ACME"}}]},
              {"answer": "done"}]
    deployment = dataclasses.replace(deployment,
                                     model_for=lambda _agent_id: ScriptedLLM(script))
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        r = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
                   headers=auth("alice"))
        assert r.status_code == 200, r.text
        request = _pending(c)

        other = c.get(f"/api/confirmations/{request['id']}", headers=auth("mallory"))
        attempt.record("another org reads a run's history through its request",
                       other.status_code != 404 or "oa__lookup_card" in other.text)
        for look_alike in (request["id"].upper(), f"{request['id']} ", f"{request['id']}%00",
                           request["run_id"]):
            got = c.get(f"/api/confirmations/{look_alike}", headers=auth("alice"))
            attempt.record(f"a look-alike request id {look_alike!r} reads a run's history",
                           got.status_code == 200 and "run_history" in got.json())

        member = c.get(f"/api/confirmations/{request['id']}", headers=auth("bob")).json()
        [failed] = member["run_history"]["calls"]
        assert failed["tool_name"] == "oa__lookup_card" and failed["status"] != "ok"
        attempt.record("a member reads an admin-only error text in a run's history",
                       SECRET in str(member))
        assert SECRET not in str(member) and "admin_error" not in str(member)
