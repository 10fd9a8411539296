"""A call's decision reaches the stored run before its tool starts: on a store that carries
the ledger (SQLite and PostgreSQL) the run's ``running`` status and the decision's event are
written by the approved call's claim, in its statement (decision record 0044), not by a
save of their own beside it. A rejected call's run stores its decision too. Over a real
server's HTTP routes, the tool reading the stored run from the database as it starts."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from hookgate import Agent, ScriptedLLM, tool
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from tests.live_server import LiveServer, live_server
from tests.runs_over_http import ended, parked

pytestmark = pytest.mark.both_databases

TOKEN = "tok-alice"
#: What the tool found in the database when it started: the run's status and its events.
SEEN: list[tuple[str, list[str]]] = []
DATABASE: dict[str, str] = {}


def stored_run() -> tuple[str, list[str]]:
    """The stamper's one run as the database holds it: status, and its events' types."""
    url = make_url(DATABASE["url"])
    if url.get_backend_name() == "sqlite":
        with sqlite3.connect(str(url.database)) as conn:
            run_id, status = conn.execute(
                "SELECT id, status FROM runs WHERE agent_id = 'stamper'").fetchone()
            events = [row[0] for row in conn.execute(
                "SELECT type FROM run_events WHERE run_id = ? ORDER BY seq", (run_id,))]
        return status, events
    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT id, status FROM runs WHERE agent_id = 'stamper'").fetchone()
        assert row is not None
        events = [r[0] for r in conn.execute(
            "SELECT type FROM run_events WHERE run_id = %s ORDER BY seq", (row[0],))]
    return row[1], events


@tool(writes=True, requires_confirmation=True)
async def stamp(ref: str) -> str:
    """Stamp a document."""
    SEEN.append(stored_run())
    return f"stamped {ref}"


def deployment(url: str) -> Deployment:
    agent = Agent(id="stamper", name="stamper", instructions="", tools=[stamp], org_id="acme",
                  owner_user_id="alice", confirmation_mode="inline_only")
    turns = [{"tool_calls": [{"name": "stamp", "args": {"ref": "r"}}]}, {"answer": "done"}]
    return Deployment(
        database_url=url, orgs=[OrgSpec("acme", "ACME")],
        users=[UserSpec("alice", "acme", admin=True, token_sha256=token_digest(TOKEN))],
        agents={"stamper": agent}, model_for=lambda _agent_id: ScriptedLLM(turns),
        channels=[])


@pytest.fixture
def server(database_url: str) -> Iterator[LiveServer]:
    DATABASE["url"] = database_url
    SEEN.clear()
    with live_server(deployment(database_url)) as srv:
        yield srv


def api_client(server: LiveServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=30,
                        headers={"Authorization": f"Bearer {TOKEN}"})


def test_an_approved_calls_run_is_stored_running_with_its_decision_before_the_tool(
        server: LiveServer) -> None:
    with api_client(server) as api:
        run_id, request = parked(api, "stamper", "stamp it")
        request_id = request["id"]
        # The parked status is saved just after the request is made (a save of its own).
        deadline = time.monotonic() + 30
        while stored_run()[0] != "awaiting_approval":
            assert time.monotonic() < deadline, stored_run()
            time.sleep(0.02)
        api.post(f"/api/confirmations/{request_id}/respond",
                 json={"decision": "approve"}).raise_for_status()
        assert ended(api, run_id)["status"] == "completed"
    assert len(SEEN) == 1  # the tool ran once
    status, events = SEEN[0]
    assert status == "running", SEEN
    assert events[-1] == "confirmation_resolved", events
    assert "tool_result" not in events


def test_a_rejected_calls_run_stores_its_decision_and_goes_on(server: LiveServer) -> None:
    with api_client(server) as api:
        run_id, request = parked(api, "stamper", "stamp it")
        request_id = request["id"]
        api.post(f"/api/confirmations/{request_id}/respond",
                 json={"decision": "reject"}).raise_for_status()
        run = ended(api, run_id)
    assert run["status"] == "completed" and SEEN == []  # the tool never ran
    status, events = stored_run()
    assert status == "completed"
    resolved = events.index("confirmation_resolved")
    assert "tool_blocked" in events[resolved:], events
    assert json.dumps(events).count("confirmation_resolved") == 1
