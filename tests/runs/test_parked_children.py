"""On PostgreSQL a delegated child (``call_agent``, a workflow's agent node) whose call waits
for a person parks the stored run it runs inside: the root holds no job while it waits, the
child's state rides in the root's checkpoint, and the decision — on any instance, after any
restart — continues the root, which resumes the child where it stopped. Nothing runs twice.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import psycopg
import pytest

from hookgate import Agent, ScriptedLLM, tool
from hookgate.runs.executors.settings import WorkerSettings
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from hookgate.workflows import parse_workflow
from tests.live_server import live_server
from tests.server.test_restart_delegation import wait_for

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
H = {"Authorization": "Bearer tok-alice"}
PAY = {"amount": 60000, "vendor": "ACME"}


def deployment(database_url: str, payments: list[float], *, levels: int = 1,
               timeout_s: int = 3600, gated_delegation: bool = False) -> Deployment:
    """``lead`` delegates to ``mid`` … to ``buyer`` (``levels`` delegations deep), whose
    payment above 50,000 waits for a person."""
    @tool(requires_confirmation=lambda a: a["amount"] > 50_000, writes=True)
    async def oa__purchase_pay(amount: float, vendor: str) -> str:
        """Pay a vendor."""
        payments.append(amount)
        return "paid"

    chain = ["lead", *(f"mid{i}" for i in range(1, levels)), "buyer"]
    agents: dict[str, Agent] = {}
    scripts: dict[str, list[dict[str, Any]]] = {}
    for caller, callee in itertools.pairwise(chain):
        agents[caller] = Agent(id=caller, name=caller, instructions="", tools=[],
                               org_id="acme", owner_user_id="alice",
                               model_config_json={"delegates": [callee]},
                               confirmation_mode="inline_only",
                               require_confirmation_for_all=gated_delegation)
        scripts[caller] = [
            {"tool_calls": [{"name": "call_agent", "id": f"via_{caller}",
                             "args": {"agent_id": callee, "message": "pay"}}]},
            {"answer": f"{caller} done"}]
    agents["buyer"] = Agent(id="buyer", name="Buyer", instructions="",
                            tools=[oa__purchase_pay], org_id="acme", owner_user_id="alice",
                            confirmation_mode="inline_only",
                            confirmation_timeout_s=timeout_s)
    scripts["buyer"] = [{"tool_calls": [{"name": "oa__purchase_pay", "args": PAY}]},
                        {"answer": "buyer done"}]
    workflow = parse_workflow({"id": "settle", "as_agent": "lead", "nodes": [
        {"id": "buy", "type": "agent", "agent": "buyer", "message": "pay"}]})
    return Deployment(
        database_url=database_url, orgs=[OrgSpec("acme")],
        users=[UserSpec("alice", "acme", token_sha256=token_digest("tok-alice"))],
        agents=agents, workflows={"settle": workflow},
        model_for=lambda agent_id: ScriptedLLM(scripts[agent_id]),
        # An expiry is a scheduled job: a worker looks for due ones every half second
        # (5 s by default), on half-second ticks.
        worker=WorkerSettings(poll_s=0.5, expiry_tick_s=0.5))


def libpq(database_url: str) -> str:
    return database_url.replace("postgresql+asyncpg://", "postgresql://")


def parked(database_url: str, run_id: str) -> dict[str, Any] | None:
    """The run's row as it waits: its stored state, and whether a job of it is queued or
    running (None while it has not parked yet)."""
    with psycopg.connect(libpq(database_url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT status, state_json, (SELECT count(*) FROM procrastinate_jobs j"
            " WHERE j.lock = runs.id AND j.status IN ('todo', 'doing'))"
            " FROM runs WHERE id = %s", (run_id,)).fetchone()
    if row is None or row[0] != "awaiting_approval" or row[2]:
        return None
    state: dict[str, Any] = json.loads(row[1])
    return state


def the_pending(c: httpx.Client) -> dict[str, Any]:
    [request] = wait_for(lambda: c.get("/api/confirmations?status=pending",
                                       headers=H).json(), "the delegate's request")
    return dict(request)


def finished(c: httpx.Client, run_id: str) -> dict[str, Any]:
    run: dict[str, Any] = wait_for(
        lambda: (r := c.get(f"/api/runs/{run_id}", headers=H).json())["status"] not in (
            "running", "awaiting_approval") and r, "the run to end", 30)
    return run


def decide(c: httpx.Client, request_id: str, decision: str = "approve") -> None:
    r = c.post(f"/api/confirmations/{request_id}/respond", json={"decision": decision},
               headers=H)
    assert r.status_code == 200, r.text


def start(c: httpx.Client, agent_id: str = "lead") -> str:
    r = c.post("/api/runs", json={"agent_id": agent_id, "message": "go"}, headers=H)
    assert r.status_code == 200, r.text
    return str(r.json()["run_id"])


@contextmanager
def a_parked_run(database_url: str, payments: list[float], **kw: Any
                 ) -> Iterator[tuple[httpx.Client, str, dict[str, Any], dict[str, Any]]]:
    """A server, the client, and a ``lead`` run parked at its delegate's request: (client,
    run id, the request, the run's stored state)."""
    with live_server(deployment(database_url, payments, **kw)) as srv, \
            httpx.Client(base_url=srv.url, timeout=10) as c:
        run_id = start(c)
        request = the_pending(c)
        state = wait_for(lambda: parked(database_url, run_id), "the root to park")
        yield c, run_id, request, state


def outcomes(run: dict[str, Any], tool_name: str) -> list[dict[str, Any]]:
    return [e for e in run["trace"] if e["type"] in ("tool_result", "tool_blocked")
            and e.get("tool_name") == tool_name]


def test_a_delegates_waiting_call_parks_the_root_and_the_decision_resumes_the_child(
        database_url: str) -> None:
    payments: list[float] = []
    with a_parked_run(database_url, payments) as (c, run_id, request, state):
        assert request["agent_id"] == "buyer" and request["run_id"] != run_id
        # Parked: no job of the run queued or running, the child's state in the root's.
        [slot] = state["extra"]["children"].values()
        assert slot["state"]["run_id"] == request["run_id"]
        assert slot["args"] == {"agent_id": "buyer", "message": "pay"}
        assert payments == []

        decide(c, request["id"])
        run = finished(c, run_id)
    assert run["status"] == "completed" and run["answer"] == "lead done"
    assert payments == [60000]
    [delegated] = outcomes(run, "call_agent")
    assert delegated["observation"] == "buyer done"
    # Each call announced once, the child started once; nothing of the child is kept.
    types = [e["type"] for e in run["trace"]]
    assert types.count("delegate_start") == 1 and types.count("tool_call") == 1
    assert types.count("done") == 1
    stored = json.loads(psycopg.connect(libpq(database_url), autocommit=True).execute(
        "SELECT state_json FROM runs WHERE id = %s", (run_id,)).fetchone()[0])
    assert "children" not in stored["extra"]


def test_a_parked_child_survives_a_restart_and_pays_once_when_approved(
        database_url: str) -> None:
    payments: list[float] = []
    with a_parked_run(database_url, payments) as (_, run_id, request, _state):
        pass

    # A new server: the child's request still waits (nobody cancelled it), and deciding it
    # there finishes the child, then the root.
    with live_server(deployment(database_url, payments)) as srv, \
            httpx.Client(base_url=srv.url, timeout=10) as c:
        assert c.get(f"/api/confirmations/{request['id']}",
                     headers=H).json()["status"] == "pending"
        decide(c, request["id"])
        run = finished(c, run_id)
    assert run["status"] == "completed" and payments == [60000]
    assert outcomes(run, "call_agent")[-1]["observation"] == "buyer done"


def test_a_rejected_childs_call_does_not_run_and_both_runs_go_on(database_url: str) -> None:
    payments: list[float] = []
    with a_parked_run(database_url, payments) as (c, run_id, request, _state):
        decide(c, request["id"], "reject")
        run = finished(c, run_id)
    assert run["status"] == "completed" and payments == []
    assert outcomes(run, "call_agent")[-1]["observation"] == "buyer done"


def test_a_grandchild_parks_the_root_through_two_delegations(database_url: str) -> None:
    payments: list[float] = []
    with a_parked_run(database_url, payments, levels=2) as (c, run_id, request, state):
        [mid] = state["extra"]["children"].values()
        [buyer] = mid["state"]["extra"]["children"].values()
        assert buyer["state"]["run_id"] == request["run_id"]
        decide(c, request["id"])
        run = finished(c, run_id)
    assert run["status"] == "completed" and run["answer"] == "lead done"
    assert payments == [60000]
    assert outcomes(run, "call_agent")[-1]["observation"] == "mid1 done"


def test_an_expired_childs_request_ends_and_the_root_goes_on(database_url: str) -> None:
    payments: list[float] = []
    with live_server(deployment(database_url, payments, timeout_s=1)) as srv, \
            httpx.Client(base_url=srv.url, timeout=10) as c:
        run_id = start(c)
        request = the_pending(c)
        run = finished(c, run_id)
        record = c.get(f"/api/confirmations/{request['id']}", headers=H).json()
    assert record["status"] in ("expired", "rejected") and payments == []
    assert run["status"] == "completed"


def test_a_workflows_agent_node_parks_the_workflow_run_and_resumes(database_url: str) -> None:
    payments: list[float] = []
    with live_server(deployment(database_url, payments)) as srv, \
            httpx.Client(base_url=srv.url, timeout=10) as c:
        r = c.post("/api/workflows/settle/runs", json={"message": "month end"}, headers=H)
        assert r.status_code == 200, r.text
        run_id = r.json()["run_id"]
        request = the_pending(c)
        state = wait_for(lambda: parked(database_url, run_id), "the workflow run to park")
        assert list(state["extra"]["children"]) == ["node:buy"]
    with live_server(deployment(database_url, payments)) as srv, \
            httpx.Client(base_url=srv.url, timeout=10) as c:
        decide(c, request["id"])
        run = finished(c, run_id)
    assert run["status"] == "completed" and run["answer"] == "buyer done"
    assert payments == [60000]


def test_a_dag_step_that_delegates_parks_the_dag_run_and_resumes(database_url: str) -> None:
    payments: list[float] = []
    dep = deployment(database_url, payments)
    dep.model_for = lambda agent_id: ScriptedLLM({
        "lead": [{"plan": {"steps": [{"id": "buy", "tool": "call_agent",
                                      "args": {"agent_id": "buyer", "message": "pay"}}]}},
                 {"answer": "planned and paid"}],
        "buyer": [{"tool_calls": [{"name": "oa__purchase_pay", "args": PAY}]},
                  {"answer": "buyer done"}]}[agent_id])
    with live_server(dep) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        r = c.post("/api/runs", json={"agent_id": "lead", "message": "go", "engine": "dag"},
                   headers=H)
        assert r.status_code == 200, r.text
        run_id = r.json()["run_id"]
        request = the_pending(c)
        state = wait_for(lambda: parked(database_url, run_id), "the DAG run to park")
        assert list(state["extra"]["children"]) == ["call:step_buy"]
    with live_server(dep) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        decide(c, request["id"])
        run = finished(c, run_id)
    assert run["status"] == "completed" and run["engine"] == "dag"
    assert payments == [60000]
    assert outcomes(run, "call_agent")[-1]["observation"] == "buyer done"


def test_a_request_parked_in_a_turn_whose_run_ended_otherwise_is_cancelled(
        database_url: str) -> None:
    """A turn's payment parks; another call of the same turn stops the run (a hook's
    ``continue: false``): the run ends, and its request does not wait for nobody."""
    payments: list[float] = []
    notes: list[str] = []

    @tool(requires_confirmation=lambda a: a["amount"] > 50_000, writes=True)
    async def oa__purchase_pay(amount: float, vendor: str) -> str:
        """Pay a vendor."""
        payments.append(amount)
        return "paid"

    @tool(writes=True)
    async def oa__note(text: str) -> str:
        """Write a note."""
        notes.append(text)
        return "noted"

    clerk = Agent(id="clerk", name="Clerk", instructions="", org_id="acme",
                  owner_user_id="alice", confirmation_mode="inline_only",
                  tools=[oa__purchase_pay, oa__note], model_config_json={"hooks": {
                      "python_hooks": [{"event": "PostToolUse", "matcher": "oa__note",
                                        "function": "tests.hookscripts.pyhooks:stop_the_run"}]}})
    dep = Deployment(
        database_url=database_url, orgs=[OrgSpec("acme")],
        users=[UserSpec("alice", "acme", token_sha256=token_digest("tok-alice"))],
        agents={"clerk": clerk}, model_for=lambda _a: ScriptedLLM([
            {"tool_calls": [{"name": "oa__purchase_pay", "args": PAY, "id": "p1"},
                            {"name": "oa__note", "args": {"text": "x"}, "id": "n1"}]},
            {"answer": "never asked"}]))
    with live_server(dep) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        run_id = start(c, "clerk")
        run = finished(c, run_id)
        assert run["status"] == "session_blocked" and notes == ["x"]
        [request] = wait_for(lambda: c.get("/api/confirmations?status=cancelled",
                                           headers=H).json(), "the request to be cancelled")
        assert request["run_id"] == run_id
        assert "ended" in request["decision"]["reason"]
        late = c.post(f"/api/confirmations/{request['id']}/respond",
                      json={"decision": "approve"}, headers=H)
        assert late.status_code == 409
        assert c.get("/api/confirmations?status=pending", headers=H).json() == []
    assert payments == []


def test_a_gated_delegation_resumes_at_its_own_gate_and_runs_its_child_once(
        database_url: str) -> None:
    """Every call of ``lead`` needs a person, ``call_agent`` included: the delegation is
    approved, the child's payment parks the root, and the root re-enters ``call_agent``
    at its gate — with that approval, not without one — and resumes the child."""
    payments: list[float] = []
    with live_server(deployment(database_url, payments, gated_delegation=True)) as srv, \
            httpx.Client(base_url=srv.url, timeout=10) as c:
        run_id = start(c)
        delegation = the_pending(c)
        assert delegation["payload"]["tool_name"] == "call_agent"
        decide(c, delegation["id"])
        payment = wait_for(lambda: [r for r in c.get(
            "/api/confirmations?status=pending", headers=H).json()
            if r["payload"]["tool_name"] == "oa__purchase_pay"], "the child's request")[0]
        wait_for(lambda: parked(database_url, run_id), "the root to park")
        decide(c, payment["id"])
        run = finished(c, run_id)
    assert run["status"] == "completed" and payments == [60000]
    [delegated] = outcomes(run, "call_agent")
    assert delegated["observation"] == "buyer done"
    resolved = [e["request_id"] for e in run["trace"] if e["type"] == "confirmation_resolved"]
    assert set(resolved) == {delegation["id"], payment["id"]}
