"""`readonly_guard`: while an org is read-only nothing that writes runs — from the very next
call after an admin flips the flag, over the API or from the CLI in another process."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from hookgate.storage.database import Database
from tests.hooks_builtin.server_world import auth, deployment
from tests.hooks_builtin.test_audit_log import REPO
from tests.hooks_builtin.world import OA, agent, call, run, sql, tool_events, with_orgs
from tests.live_server import live_server

pytestmark = pytest.mark.both_databases
MESSAGE = "Org is in read-only mode — write blocked."
PAY = call("oa__purchase_pay", amount=100, vendor="ACME")
LOOKUP = call("crm__lookup", customer="Globex")


async def test_writes_are_blocked_while_read_only_and_reads_still_run(db: Database) -> None:
    await with_orgs(db, ("acme", True))
    oa = OA()

    result = await run(db, agent(oa, "readonly_guard"), PAY, LOOKUP)

    pay, lookup = tool_events(result)
    assert pay["status"] == "blocked" and pay["blocked_by"] == "readonly_guard"
    assert pay["observation"] == MESSAGE
    assert lookup["status"] == "ok" and oa.lookups == 1
    assert oa.payments == []


async def test_an_org_the_database_does_not_know_cannot_write(db: Database) -> None:
    oa = OA()

    result = await run(db, agent(oa, "readonly_guard", org="ghost"), PAY, org="ghost")

    (pay,) = tool_events(result)
    assert pay["status"] == "blocked"
    assert "Org 'ghost' is not in the database" in pay["observation"]
    assert oa.payments == []


async def test_a_flag_that_cannot_be_read_blocks_the_write(db: Database) -> None:
    await with_orgs(db, ("acme", False))
    await sql(db, "ALTER TABLE orgs RENAME TO orgs_elsewhere")
    oa = OA()

    result = await run(db, agent(oa, "readonly_guard"), PAY, LOOKUP)

    pay, lookup = tool_events(result)
    assert pay["status"] == "blocked" and pay["blocked_by"] == "readonly_guard"
    assert pay["observation"].startswith(
        "Blocked: hook 'readonly_guard' failed: OrgFlagUnavailable: cannot read whether "
        "org 'acme' is read-only")
    assert lookup["status"] == "ok"  # reads never look at the flag
    assert oa.payments == []


# -- set over HTTP and from the CLI, while a server runs --------------------------------------


def start_and_wait(c: httpx.Client, agent_id: str = "buyer") -> dict[str, Any]:
    user = "mallory" if agent_id == "rival" else "alice"
    r = c.post("/api/runs", json={"agent_id": agent_id, "message": "pay"}, headers=auth(user))
    assert r.status_code == 200, r.text
    run_id = r.json()["run_id"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        body: dict[str, Any] = c.get(f"/api/runs/{run_id}", headers=auth(user)).json()
        if body["status"] not in ("running", "awaiting_approval"):
            return body
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish")


def pay_outcome(c: httpx.Client) -> str:
    run_ = start_and_wait(c)
    (event,) = [e for e in run_["trace"] if e["type"] in ("tool_result", "tool_blocked")]
    return str(event["observation"])


def test_an_org_admin_sets_read_only_over_the_api_and_the_next_call_obeys(
        database_url: str) -> None:
    oa = OA()
    with live_server(deployment(database_url, oa, [PAY])) as srv, \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        assert pay_outcome(c) == "paid 100 to ACME"

        r = c.put("/api/orgs/acme/read_only", json={"read_only": True}, headers=auth("alice"))
        assert r.status_code == 200 and r.json() == {"org_id": "acme", "read_only": True}
        assert pay_outcome(c) == MESSAGE
        assert c.get("/api/orgs/acme/read_only", headers=auth("bob")).json()["read_only"]

        r = c.put("/api/orgs/acme/read_only", json={"read_only": False}, headers=auth("bob"))
        assert r.status_code == 403 and "only an admin of org 'acme'" in r.json()["error"]
        r = c.put("/api/orgs/acme/read_only", json={"read_only": False},
                  headers=auth("mallory"))
        assert r.status_code == 404  # an admin of another org does not even see it
        assert pay_outcome(c) == MESSAGE

        assert c.put("/api/orgs/acme/read_only", json={"read_only": False},
                     headers=auth("alice")).status_code == 200
        assert pay_outcome(c) == "paid 100 to ACME"
        assert c.put("/api/orgs/acme/read_only", json={"read_only": "yes please"},
                     headers=auth("alice")).status_code == 422
        assert c.put("/api/orgs/acme/read_only", json={"read_only": True}).status_code == 401
    assert len(oa.payments) == 2


def test_read_only_set_from_the_cli_reaches_a_running_server_at_the_next_call(
        database_url: str) -> None:
    oa = OA()
    with live_server(deployment(database_url, oa, [PAY])) as srv, \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        on = orgs_cli("read-only", "acme", "on", "--database", database_url)
        assert on.returncode == 0, on.stderr
        assert "org 'acme' is read-only" in on.stdout
        assert pay_outcome(c) == MESSAGE
        # Another org is not affected.
        rival = start_and_wait(c, "rival")
        assert [e["observation"] for e in rival["trace"] if e["type"] == "tool_result"] == [
            "paid 100 to ACME"]

        off = orgs_cli("read-only", "acme", "off", "--database", database_url)
        assert off.returncode == 0 and "writable again" in off.stdout
        assert pay_outcome(c) == "paid 100 to ACME"

    shown = orgs_cli("read-only", "acme", "--database", database_url)
    assert shown.stdout.strip() == "org 'acme' is writable"
    missing = orgs_cli("read-only", "ghost", "on", "--database", database_url)
    assert missing.returncode == 1 and "no org 'ghost'" in missing.stderr


def orgs_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", "orgs", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=120)


async def test_redeclaring_an_org_renames_it_but_keeps_its_read_only_flag(db: Database) -> None:
    from hookgate.storage.orgs import org_read_only, set_org_read_only, sync_orgs
    from hookgate.storage.tables import Org

    await sync_orgs(db, [("acme", "ACME", False)])
    await set_org_read_only(db, "acme", True)
    await sync_orgs(db, [("acme", "ACME Corp", False), ("globex", "Globex", True)])
    assert await org_read_only(db, "acme") is True
    assert await org_read_only(db, "globex") is True
    async with db.session() as s:
        row = await s.get(Org, "acme")
        assert row is not None and row.name == "ACME Corp"
