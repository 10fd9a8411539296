"""Who decided each call, in the audit log, through a real server: a call a person approved
after a wait names that person and the request, keeps the wait apart from the tool's own
time, and a rule-approved call names the rule; an ungated call names nobody. The rows verify
(`hookgate audit verify`) and `hookgate audit list` shows and filters them."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookgate import Agent
from hookgate.runtime.deployment import Deployment
from tests.conftest import migrated_database_url
from tests.live_server import LiveServer, live_server
from tests.portal.steps import WAIT_S, wait_finished
from tests.server.demo_world import TOKENS, Ledger, auth, world

REPO = Path(__file__).resolve().parents[2]
#: How long the person takes to decide: long against a tool that only appends to a list.
THINK_S = 1.2
WHEN = 'args.vendor == "ACME" and args.amount <= 80000'


def _pay(call_id: str, amount: int, vendor: str = "ACME") -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": "oa__purchase_pay",
                            "args": {"amount": amount, "vendor": vendor}}]}


def _audited(agent: Agent) -> Agent:
    return dataclasses.replace(agent, model_config_json={"hooks": {"class_hooks": ["audit_log"]}})


def _next_pending(c: httpx.Client, seen: int) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        every = c.get("/api/confirmations?status=all", headers=auth("alice")).json()
        pending = [r for r in every if r["status"] == "pending"]
        if pending and len(every) == seen + 1:
            return dict(pending[0])
        time.sleep(0.05)
    raise AssertionError(f"request {seen + 1} did not appear")


def _decide(c: httpx.Client, request_id: str, **body: Any) -> dict[str, Any]:
    r = c.post(f"/api/confirmations/{request_id}/respond", json=body, headers=auth("alice"))
    assert r.status_code == 200, r.text
    return dict(r.json())


def audited_world(database_url: str) -> tuple[Deployment, Ledger]:
    """The buyer with the audit log, and a run of four calls: 'asked' (60,000), 'ruled'
    (70,000), 'small' (100, needs nobody) and 'refused' (90,000)."""
    turns = [_pay("asked", 60000), _pay("ruled", 70000), _pay("small", 100),
             _pay("refused", 90000), {"answer": "done"}]
    deployment, bank = world(database_url, turns=turns)
    deployment.agents["buyer"] = _audited(deployment.agents["buyer"])
    return deployment, bank


def decide_the_four_calls(c: httpx.Client, bank: Ledger) -> dict[str, Any]:
    """'asked' waits THINK_S for alice, who approves it and remembers a rule; 'ruled' is
    approved by that rule; 'small' needs nobody; alice rejects 'refused'."""
    run_id = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
                    headers=auth("alice")).json()["run_id"]
    asked = _next_pending(c, 0)
    time.sleep(THINK_S)
    rule = _decide(c, asked["id"], decision="approve", remember={
        "scope": "agent_user", "expires_in": 3600, "when": WHEN})["rule"]
    refused = _next_pending(c, 1)
    _decide(c, refused["id"], decision="reject", reason="too much")
    assert wait_finished(c, run_id) == "completed"
    assert len(bank.payments) == 3
    return {"asked": asked["id"], "refused": refused["id"], "rule": rule["id"],
            "run": run_id}


@contextmanager
def decided_world(database_url: str) -> Iterator[tuple[LiveServer, httpx.Client, Ledger,
                                                        dict[str, Any]]]:
    deployment, bank = audited_world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        yield srv, c, bank, decide_the_four_calls(c, bank)


@dataclasses.dataclass(frozen=True)
class Decided:
    """The server after the four calls, on a database of the backend under test."""

    database_url: str
    srv: LiveServer
    c: httpx.Client
    ids: dict[str, Any]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def decided(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Decided]:
    """One decided world per backend for the module's tests (a world is a server, a run and
    a person's THINK_S wait): they read its rows, and the one that edits a row puts it back
    before it ends, so none depends on what another did or on their order."""
    url = migrated_database_url(request, tmp_path_factory.mktemp("audit-decisions"))
    with decided_world(url) as (srv, c, _bank, ids):
        yield Decided(url, srv, c, ids)


def _rows(c: httpx.Client, **query: Any) -> dict[str, dict[str, Any]]:
    items = c.get("/api/audit", params=query, headers=auth("alice")).json()["items"]
    return {row["tool_call_id"]: row for row in items}


def hookgate(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKGATE_")}
    env["COLUMNS"] = "250"
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env=env)


def test_a_call_a_person_approved_after_a_wait_names_them_and_keeps_the_wait_apart(
        decided: Decided) -> None:
    ids = decided.ids
    rows = _rows(decided.c)
    asked = rows["asked"]
    assert (asked["outcome"], asked["approver"], asked["request_id"]) == (
        "ok", "alice", ids["asked"])
    assert asked["wait_us"] >= THINK_S * 1_000_000
    # The tool appends to a list; had its time included the wait, it would exceed it.
    assert asked["latency_us"] < asked["wait_us"]
    assert asked["hash_v"] == 3

    ruled = rows["ruled"]
    assert (ruled["outcome"], ruled["approver"], ruled["request_id"], ruled["wait_us"]) == (
        "ok", f"rule {ids['rule']} (created by alice)", None, None)
    assert ruled["detail"] == f"approved by rule {ids['rule']}, created by alice"

    small = rows["small"]
    assert (small["outcome"], small["approver"], small["request_id"], small["wait_us"],
            small["hash_v"]) == ("ok", None, None, None, 2)

    refused = rows["refused"]
    assert (refused["outcome"], refused["blocked_by"], refused["approver"],
            refused["request_id"]) == ("blocked", "approval_gate", "alice", ids["refused"])
    assert refused["wait_us"] is not None and refused["wait_us"] >= 0


def test_the_chain_with_decisions_verifies_and_a_changed_approver_is_named(
        decided: Decided) -> None:
    srv, database_url = decided.srv, decided.database_url
    asked = _rows(decided.c)["asked"]
    ok = hookgate("audit", "verify", "--database", database_url)
    assert ok.returncode == 0, ok.stderr
    assert "ok: 4 row(s) in 1 chain(s) verified" in ok.stdout

    async def set_approver(approver: str) -> None:
        from sqlalchemy import text
        async with srv.runtime.db.engine.begin() as conn:
            await conn.execute(text("UPDATE connector_call_logs SET approver = :approver "
                                    "WHERE id = :id"), {"approver": approver, "id": asked["id"]})
    srv.call(set_approver("bob"))
    try:
        bad = hookgate("audit", "verify", "--database", database_url)
    finally:
        srv.call(set_approver(asked["approver"]))  # the module's other tests read this row
    assert bad.returncode == 1
    assert f"row {asked['id']} (seq {asked['seq']}, oa__purchase_pay) was edited" in bad.stderr


def test_hookgate_audit_list_filters_and_prints_a_table_or_json(decided: Decided) -> None:
    srv, ids = decided.srv, decided.ids
    base = ("--url", srv.url, "--token", TOKENS["alice"])
    table = hookgate("audit", "list", *base)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert "decided by" in lines[0] and "wait" in lines[0] and "tool time" in lines[0]
    asked = next(line for line in lines if ids["asked"] in line and " ok " in line)
    assert "alice" in asked and "buyer" in asked
    assert any(f"rule {ids['rule']} (created by alice)" in line for line in lines)

    blocked = hookgate("audit", "list", *base, "--outcome", "blocked", "--json")
    assert blocked.returncode == 0, blocked.stderr
    assert [(r["tool_call_id"], r["approver"]) for r in json.loads(blocked.stdout)] == [
        ("refused", "alice")]
    # The person who rejected is named for what they did.
    assert [(r["decided_by"], r["decision"]) for r in json.loads(blocked.stdout)] == [
        ("alice", "rejected")]

    recent = json.loads(hookgate("audit", "list", *base, "--since", "1h", "--agent",
                                 "buyer", "--tool", "oa__purchase_pay", "--json").stdout)
    assert [r["tool_call_id"] for r in recent] == ["refused", "small", "ruled", "asked"]
    one = json.loads(hookgate("audit", "list", *base, "--limit", "1", "--json").stdout)
    assert [r["tool_call_id"] for r in one] == ["refused"]
    future = json.loads(hookgate("audit", "list", *base, "--since",
                                 "2999-01-01T00:00:00", "--json").stdout)
    assert future == []
    for agent in ("nobody", "BUYER", "buyer\u200b"):  # look-alikes match nothing
        assert json.loads(hookgate("audit", "list", *base, "--agent", agent,
                                   "--json").stdout) == []
    empty = hookgate("audit", "list", *base, "--agent", "nobody")
    assert empty.stdout.strip() == "no audit rows match"

    bad_since = hookgate("audit", "list", *base, "--since", "nan")
    assert bad_since.returncode == 2 and "--since takes a duration" in bad_since.stderr
    bad_outcome = hookgate("audit", "list", *base, "--outcome", "fine")
    assert bad_outcome.returncode == 1 and "outcome must be one of" in bad_outcome.stderr
    other_org = json.loads(hookgate("audit", "list", "--url", srv.url, "--token",
                                    TOKENS["mallory"], "--json").stdout)
    assert other_org == []  # another org's rows are never listed
