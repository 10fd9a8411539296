"""`hookgate audit list` and GET /api/audit as a person reads them, against a real server
(SQLite and PostgreSQL) and real `hookgate` subprocesses: who decided a call and what
(rejections too), the session as the external agent named it and a filter on it, and a
table that fits an 80-column terminal without cutting a request id."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hookgate.client import Allowed, Client, Pending
from tests.api_v1.test_guarded_calls import ALICE, BOT, deployment
from tests.live_server import LiveServer, live_server
from tests.loopback_http import HTTP

pytestmark = pytest.mark.both_databases
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def server(database_url: str) -> Iterator[LiveServer]:
    with live_server(deployment(database_url)) as srv:
        yield srv


def hookgate(*args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "HOOKGATE_URL",
                                                            "HOOKGATE_TOKEN")}
    env.update(COLUMNS=str(columns), NO_COLOR="1",
               PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def _decide(server: LiveServer, request_id: str, decision: str) -> None:
    r = HTTP.post(f"{server.url}/api/confirmations/{request_id}/respond",
                  json={"decision": decision}, headers={"Authorization": f"Bearer {ALICE}"})
    assert r.status_code == 200, r.text


def _decided_call(server: LiveServer, guard: Client, session: str, call: str,
                  decision: str) -> str:
    """A transfer of ``session`` a person decides; its request id."""
    asked = guard.before_call(agent="payer", session_id=session, call_id=call,
                              tool="transfer", arguments={"amount": 500, "to": "bob"})
    assert isinstance(asked, Pending)
    box: dict[str, Any] = {}
    waiter = threading.Thread(target=lambda: box.update(v=guard.wait(asked.call, timeout=30)))
    waiter.start()
    _decide(server, asked.request_id, decision)
    waiter.join(40)
    if isinstance(box["v"], Allowed):
        guard.report(box["v"].call, output="sent")
    return asked.request_id


def _audit(server: LiveServer, **params: Any) -> list[dict[str, Any]]:
    r = HTTP.get(f"{server.url}/api/audit", params={"limit": 100, **params},
                 headers={"Authorization": f"Bearer {ALICE}"})
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


def test_the_audit_names_who_decided_what_and_the_session_and_filters_by_it(
        server: LiveServer) -> None:
    with Client(server.url, BOT, framework="langgraph") as guard:
        session = "checkout-7f3a9c-2026-12-06"  # as the agent names it
        approved = _decided_call(server, guard, session, "t1", "approve")
        rejected = _decided_call(server, guard, "other-session-1", "t2", "reject")
        searched = guard.before_call(agent="payer", session_id=session, call_id="s1",
                                     tool="search", arguments={"q": "invoices"})
        assert isinstance(searched, Allowed)
        guard.report(searched.call, output={"hits": 3})

    rows = {r["request_id"] or r["tool_call_id"]: r for r in _audit(server)}
    assert (rows[approved]["decided_by"], rows[approved]["decision"]) == ("alice", "approved")
    assert (rows[rejected]["decided_by"], rows[rejected]["decision"]) == ("alice", "rejected")
    assert (rows["s1"]["decided_by"], rows["s1"]["decision"]) == (None, None)
    assert rows[approved]["session_id"] == session and rows["s1"]["session_id"] == session
    assert rows[rejected]["session_id"] == "other-session-1"

    only = _audit(server, session=session)
    assert [r["id"] for r in only] == [r["id"] for r in _audit(server)
                                       if r["session_id"] == session]
    assert {r["tool_name"] for r in only} == {"search", "transfer"}
    assert _audit(server, session="no-such-session") == []

    listed = hookgate("audit", "list", "--url", server.url, "--token", ALICE,
                      "--session", "other-session-1")
    assert listed.returncode == 0, listed.stderr
    header = listed.stdout.splitlines()[0].split()
    assert "decided" in header and "approver" not in header and "session" in header
    [line] = [x for x in listed.stdout.splitlines() if rejected in x]
    assert "alice (rejected)" in line and "other-session-1" in line
    assert approved not in listed.stdout


def test_audit_list_fits_80_columns_and_keeps_request_ids_whole(server: LiveServer) -> None:
    with Client(server.url, BOT, framework="langgraph") as guard:
        ids = [_decided_call(server, guard, f"session-with-a-long-name-{n}", f"t{n}",
                             "approve" if n % 2 else "reject") for n in range(3)]
    listed = hookgate("audit", "list", "--url", server.url, "--token", ALICE, columns=80)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, listed.stdout
    for request_id in ids:  # whole, on one line: what `approvals show` takes
        assert sum(request_id in line for line in lines) == 1, listed.stdout
    flat = " ".join(listed.stdout.split())
    for request_id in ids:  # who decided, and what, beside the request (folded if need be)
        at = next(n for n, line in enumerate(lines) if request_id in line)
        said = " ".join(lines[at:at + 2])
        assert "alice" in lines[at] and ("(approved)" in said or "(rejected)" in said), said
    # What did not fit is named, not silently dropped.
    assert "(left out at this width:" in flat and "--json" in flat

    wide = hookgate("audit", "list", "--url", server.url, "--token", ALICE, columns=200)
    assert "left out" not in wide.stdout
    assert "session-with-a-long-name-0" in wide.stdout


@pytest.mark.parametrize("forgery", [
    "session_id = 's-other'",  # another session named
    "session_id = NULL, hash_v = 4",  # the session stripped, the row passed off as older
])
def test_a_changed_or_stripped_session_is_named_by_audit_verify(
        server: LiveServer, database_url: str, forgery: str) -> None:
    with Client(server.url, BOT, framework="langgraph") as guard:
        named = guard.before_call(agent="payer", session_id="s-named", call_id="n1",
                                  tool="search", arguments={"q": "a"})
        assert isinstance(named, Allowed)
        guard.report(named.call, output="found")
    rows = {r["tool_call_id"]: r for r in _audit(server)}
    assert rows["n1"]["hash_v"] == 5  # the row's hash covers its session
    assert hookgate("audit", "verify", "--database", database_url).returncode == 0

    async def forge() -> None:
        from sqlalchemy import text
        async with server.runtime.db.engine.begin() as conn:
            await conn.execute(text(f"UPDATE connector_call_logs SET {forgery} "
                                    "WHERE id = :id"), {"id": rows["n1"]["id"]})
    server.call(forge())
    bad = hookgate("audit", "verify", "--database", database_url)
    assert bad.returncode == 1
    assert f"row {rows['n1']['id']} (seq {rows['n1']['seq']}, search) was edited" in bad.stderr
