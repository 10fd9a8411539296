"""With one process on a SQLite file a delegate waits for its approval in memory; when the
server stops it does not resume, its request is cancelled instead of waiting for nobody,
and the payment never runs. (On PostgreSQL the delegate parks with its root run and
resumes after a restart: tests/runs/test_parked_children.py.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from hookgate import Agent, ScriptedLLM, tool
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from tests.live_server import live_server
from tests.polling import wait_for

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
H = {"Authorization": "Bearer tok-alice"}


def deployment(database_url: str, payments: list[float]) -> Deployment:
    @tool(requires_confirmation=lambda a: a["amount"] > 50_000, writes=True)
    async def oa__purchase_pay(amount: float, vendor: str) -> str:
        """Pay a vendor."""
        payments.append(amount)
        return "paid"

    lead = Agent(id="lead", name="Lead", instructions="", tools=[], org_id="acme",
                 owner_user_id="alice", model_config_json={"delegates": ["buyer"]})
    buyer = Agent(id="buyer", name="Buyer", instructions="", tools=[oa__purchase_pay],
                  org_id="acme", owner_user_id="alice", confirmation_mode="inline_only")
    scripts: dict[str, list[dict[str, Any]]] = {
        "lead": [{"tool_calls": [{"name": "call_agent", "id": "d1",
                                  "args": {"agent_id": "buyer", "message": "pay"}}]},
                 {"answer": "lead done"}],
        "buyer": [{"tool_calls": [{"name": "oa__purchase_pay",
                                   "args": {"amount": 60000, "vendor": "ACME"}}]},
                  {"answer": "buyer done"}],
    }
    return Deployment(
        database_url=database_url, orgs=[OrgSpec("acme")],
        users=[UserSpec("alice", "acme", token_sha256=token_digest("tok-alice"))],
        agents={"lead": lead, "buyer": buyer},
        model_for=lambda agent_id: ScriptedLLM(scripts[agent_id]))


def test_an_interrupted_delegates_request_is_cancelled_on_restart(database_url: str) -> None:
    payments: list[float] = []
    with live_server(deployment(database_url, payments)) as srv, \
            httpx.Client(base_url=srv.url, timeout=10) as c:
        run_id = c.post("/api/runs", json={"agent_id": "lead", "message": "go"},
                        headers=H).json()["run_id"]
        [request] = wait_for(
            lambda: c.get("/api/confirmations?status=pending", headers=H).json(),
            "the delegate's request")
        assert request["agent_id"] == "buyer" and request["run_id"] != run_id

    with live_server(deployment(database_url, payments)) as srv, \
            httpx.Client(base_url=srv.url, timeout=10) as c:
        run = wait_for(lambda: (r := c.get(f"/api/runs/{run_id}", headers=H).json())
                       ["status"] == "completed" and r, "the lead run to finish")
        record = c.get(f"/api/confirmations/{request['id']}", headers=H).json()
        assert record["status"] == "cancelled"
        assert "interrupted by a restart" in record["decision"]["reason"]
        late = c.post(f"/api/confirmations/{request['id']}/respond",
                      json={"decision": "approve"}, headers=H)
        assert late.status_code == 409
        outcome = [e for e in run["trace"] if e["type"] in ("tool_result", "tool_blocked")
                   and e.get("tool_name") == "call_agent"][-1]
        assert "not run a second time" in outcome["observation"]
    assert payments == []
