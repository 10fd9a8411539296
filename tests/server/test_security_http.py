"""The security guarantees over HTTP, on a real server and database: an approval covers one
exact call (a re-used call id gets its own request), a write approved after the org turned
read-only does not run (also when the run resumes after a restart), and a withheld tool
output reaches no one but admins, masked."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from hookgate import Agent, ScriptedLLM
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from hookgate.storage.database import Database
from hookgate.storage.orgs import set_org_read_only
from tests.adversarial.conftest import Tally
from tests.adversarial.test_call_binding_attempts import LATE, wire_tool
from tests.adversarial.test_withheld_attempts import DIGITS, card_tool
from tests.adversarial_tally import TALLY
from tests.engines.world import ALICE, Bank
from tests.hooks_builtin.server_world import TOKENS, auth
from tests.live_server import live_server
from tests.server.test_api import wait_pending, wait_run
from tests.sse import read_events

pytestmark = pytest.mark.both_databases

ARGS = {"amount": 60000, "vendor": "X"}


@pytest.fixture
def attempt() -> Tally:
    return TALLY


def deployment(database_url: str, hooks: list[Any], turns: list[dict[str, Any]]
               ) -> tuple[Deployment, Bank]:
    bank = Bank()
    agent = Agent(id="buyer", name="Buyer", instructions="", org_id="acme",
                  owner_user_id="alice", tools=[*bank.tools(), wire_tool(bank), card_tool()],
                  model_config_json={"hooks": {"class_hooks": hooks}})
    return Deployment(
        database_url=database_url,
        orgs=[OrgSpec("acme", "ACME Corp")],
        users=[UserSpec("alice", "acme", admin=True,
                        token_sha256=token_digest(TOKENS["alice"])),
               UserSpec("bob", "acme", token_sha256=token_digest(TOKENS["bob"]))],
        agents={"buyer": agent},
        model_for=lambda _a: ScriptedLLM([*turns, {"answer": "done"}]),
    ), bank


def start(c: httpx.Client, user: str = "alice") -> str:
    r = c.post("/api/runs", json={"agent_id": "buyer", "message": "go"}, headers=auth(user))
    assert r.status_code == 200, r.text
    return str(r.json()["run_id"])


def decide(c: httpx.Client, request_id: str, decision: str) -> None:
    r = c.post(f"/api/confirmations/{request_id}/respond", json={"decision": decision},
               headers=auth("alice"))
    assert r.status_code == 200, r.text


def test_a_reused_call_id_for_another_tool_is_asked_about_again_over_http(
        database_url: str, attempt: Tally) -> None:
    turns = [{"tool_calls": [{"id": "c1", "name": "oa__purchase_pay", "args": ARGS}]},
             {"tool_calls": [{"id": "c1", "name": "oa__wire_pay", "args": ARGS}]}]
    dep, bank = deployment(database_url, [LATE], turns)
    with live_server(dep) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        run_id = start(c)
        first = wait_pending(c)
        assert first["payload"]["tool_name"] == "oa__purchase_pay"
        decide(c, first["id"], "approve")
        second = wait_pending(c)
        assert second["id"] != first["id"]
        assert second["payload"] == {**first["payload"], "tool_name": "oa__wire_pay"}
        assert second["tool_call_id"] != "c1"
        decide(c, second["id"], "reject")
        run = wait_run(c, run_id)
    attempt.record("http: approved call id re-used for another tool", bool(bank.payments))
    assert bank.payments == [] and run["status"] == "completed"
    calls = [(e["tool_call_id"], e["tool_name"]) for e in run["trace"]
             if e["type"] == "tool_call"]
    # On PostgreSQL a call that waits parks its run; the continuation that re-enters it does
    # not announce it again: each call once.
    assert calls == [("c1", "oa__purchase_pay"), (second["tool_call_id"], "oa__wire_pay")]


def test_a_write_approved_after_read_only_was_switched_on_over_http_does_not_run(
        database_url: str, attempt: Tally) -> None:
    turns = [{"tool_calls": [{"name": "oa__purchase_pay", "args": ARGS}]}]
    dep, bank = deployment(database_url, ["readonly_guard"], turns)
    with live_server(dep) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        run_id = start(c)
        request = wait_pending(c)
        r = c.put("/api/orgs/acme/read_only", json={"read_only": True}, headers=auth("alice"))
        assert r.status_code == 200, r.text
        decide(c, request["id"], "approve")
        run = wait_run(c, run_id)
    attempt.record("http: write approved after read-only was switched on",
                   bool(bank.payments))
    assert bank.payments == []
    [blocked] = [e for e in run["trace"] if e["type"] == "tool_blocked"]
    assert blocked["blocked_by"] == "readonly_guard"
    assert "checked again right before the call" in blocked["observation"]


def test_a_resumed_run_checks_read_only_again_before_the_approved_write(
        database_url: str, attempt: Tally) -> None:
    turns = [{"tool_calls": [{"id": "pay1", "name": "oa__purchase_pay", "args": ARGS}]}]
    dep, bank = deployment(database_url, ["readonly_guard"], turns)
    with live_server(dep) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        run_id = start(c)
        request = wait_pending(c)

    async def while_down() -> None:
        # With the server stopped: the org turns read-only, then the person approves.
        db = Database(database_url)
        try:
            await set_org_read_only(db, "acme", True)
            await PersistentApprovals(db).decide(request["id"], "approve", ALICE)
        finally:
            await db.dispose()

    asyncio.run(while_down())
    dep2, bank2 = deployment(database_url, ["readonly_guard"], turns)
    with live_server(dep2) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        run = wait_run(c, run_id)
    attempt.record("http: resumed approved write while read-only",
                   bool(bank.payments or bank2.payments))
    assert bank.payments == [] and bank2.payments == []
    blocked = [e for e in run["trace"] if e["type"] == "tool_blocked"]
    assert [b["blocked_by"] for b in blocked] == ["readonly_guard"]
    # It resumed at the gate (the hooks before it had run), then re-checked read-only.
    assert "checked again right before the call" in blocked[0]["observation"]


def _has_key(value: Any, key: str) -> bool:
    if isinstance(value, dict):
        return key in value or any(_has_key(v, key) for v in value.values())
    if isinstance(value, list):
        return any(_has_key(v, key) for v in value)
    return False


def test_a_withheld_output_reaches_admins_masked_and_members_not_at_all(
        database_url: str, attempt: Tally) -> None:
    turns = [{"tool_calls": [{"name": "crm__card", "args": {"customer": "Globex"}}]}]
    hook = "tests.adversarial.test_withheld_attempts:EchoingFailure"
    dep, _bank = deployment(database_url, [hook], turns)
    with live_server(dep) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        run_id = start(c, "bob")
        member = wait_run(c, run_id, user="bob")
        admin = c.get(f"/api/runs/{run_id}", headers=auth("alice")).json()
        with c.stream("GET", f"/api/runs/{run_id}/events", headers=auth("bob")) as resp:
            streamed = [ev.data for ev in read_events(resp)
                        if not ev.comment and ev.data]
    everything = json.dumps([member, streamed]).replace(" ", "")
    attempt.record("http: withheld output shown to a member", DIGITS in everything)
    assert DIGITS not in everything
    assert not _has_key(member, "admin_output") and not _has_key(streamed, "admin_output")
    [outcome] = [e for e in member["trace"] if e["type"] == "tool_result"]
    assert outcome["status"] == "withheld"
    assert outcome["observation"].startswith("Tool output withheld: the tool ran, but")
    [admin_view] = [e for e in admin["trace"] if e["type"] == "tool_result"]
    [failed] = [h for h in admin_view["hooks"] if h["kind"] == "failed"]
    assert "••••1111" in failed["admin_output"]
    assert DIGITS not in json.dumps(admin).replace(" ", "")
