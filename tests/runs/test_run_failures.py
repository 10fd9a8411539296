"""No run is left "running": over HTTP on a real server, a model's 300-deep or lone-surrogate
arguments are refused with a message and the run completes; a tool result that cannot be
stored, a stored state that no longer loads, and a PostgreSQL cluster stopped right after
the tool ran each end the run as ``failed`` with a reason, which holds across restarts."""

from __future__ import annotations

import asyncio
import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookgate import Agent, ScriptedLLM, tool
from hookgate.runs import events_bus
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from hookgate.storage.database import Database
from hookgate.storage.runs import DatabaseRunStore
from hookgate.storage.tables import RunRow
from hookgate.storage.types import utcnow
from tests.conftest import pgcluster
from tests.live_server import live_server

TOKEN = "tok-alice"
H = {"Authorization": f"Bearer {TOKEN}"}
SQL_MARKS = ("INSERT", "UPDATE ", "SELECT", "[SQL", "parameters")


def strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"the API sent the non-JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def deployment(database_url: str, turns: list[dict[str, Any]], side_effect: Any = None
               ) -> tuple[Deployment, list[str]]:
    ran: list[str] = []

    @tool(writes=True)
    async def oa__note(text: Any) -> str:
        """Write a note (the test decides what comes back)."""
        ran.append(json.dumps(text))
        if side_effect is not None:
            return str(await side_effect())
        return "noted"

    agent = Agent(id="clerk", name="Clerk", instructions="You take notes.", tools=[oa__note],
                  org_id="acme", owner_user_id="alice")
    return Deployment(
        database_url=database_url, orgs=[OrgSpec("acme", "ACME")],
        users=[UserSpec("alice", "acme", admin=True, token_sha256=token_digest(TOKEN))],
        agents={"clerk": agent}, model_for=lambda _a: ScriptedLLM(turns)), ran


def start_run(c: httpx.Client) -> str:
    r = c.post("/api/runs", json={"agent_id": "clerk", "message": "note it"}, headers=H)
    assert r.status_code == 200, r.text
    return str(r.json()["run_id"])


def wait_run(c: httpx.Client, run_id: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = c.get(f"/api/runs/{run_id}", headers=H)
        if r.status_code == 200:
            body: dict[str, Any] = strict_json(r.text)
            if body["status"] not in ("running", "awaiting_approval"):
                return body
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} is still running")


def deep(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"d": value}
    return value


@pytest.mark.both_databases
def test_unstorable_model_arguments_are_refused_and_the_run_completes(
        database_url: str) -> None:
    turns = [{"tool_calls": [{"name": "oa__note", "args": {"text": deep(300)}, "id": "a"},
                             {"name": "oa__note", "args": {"text": "x\ud83d"}, "id": "b"},
                             {"name": "oa__note", "args": {"text": float("nan")}, "id": "c"},
                             {"name": "oa__note", "args": {"text": "ok"}, "id": "d" * 300}]},
             {"answer": "done"}]
    dep, ran = deployment(database_url, turns)
    with live_server(dep) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run = wait_run(c, start_run(c))
    assert run["status"] == "completed" and run["answer"] == "done"
    assert ran == ['"ok"']
    blocked = {e["tool_call_id"]: e for e in run["trace"] if e["type"] == "tool_blocked"}
    assert "nest deeper than" in blocked["a"]["observation"]
    assert "lone surrogate" in blocked["b"]["observation"]
    assert "finite" in blocked["c"]["observation"]


@pytest.mark.both_databases
def test_a_tool_result_that_cannot_be_stored_fails_the_run_for_good(
        database_url: str) -> None:
    async def unstorable() -> str:
        return "card 4111 1111 1111 1111 \ud83d"

    dep, ran = deployment(database_url, [
        {"tool_calls": [{"name": "oa__note", "args": {"text": "x"}}]}, {"answer": "done"}],
        unstorable)
    with live_server(dep) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c)
        run = wait_run(c, run_id)
    assert run["status"] == "failed" and run["error"]
    assert "surrogate" in run["error"]
    assert "4111 1111" not in run["error"]
    assert not any(mark in run["error"] for mark in SQL_MARKS), run["error"]
    assert ran == ['"x"']

    # A restart neither resumes nor re-runs it.
    dep2, ran2 = deployment(database_url, [{"answer": "never"}])
    with live_server(dep2) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        time.sleep(0.5)
        again = strict_json(c.get(f"/api/runs/{run_id}", headers=H).text)
    assert again["status"] == "failed" and ran2 == []


@pytest.mark.both_databases
def test_a_stored_state_that_no_longer_loads_is_failed_and_the_server_starts(
        database_url: str) -> None:
    dep, _ = deployment(database_url, [{"answer": "x"}])

    async def plant() -> None:
        db = Database(database_url)
        await db.upgrade()
        async with db.transaction() as s:
            s.add(RunRow(id="run_broken", agent_id="clerk", org_id="acme", user_id="alice",
                         engine="react", status="running", state_json='{"not": "a state"',
                         created_at=utcnow(), updated_at=utcnow()))
        await db.dispose()

    asyncio.run(plant())
    for _ in range(2):  # and it stays so: the second start does not trip over it either
        with live_server(dep) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
            assert c.get("/api/me", headers=H).status_code == 200
            shown = c.get("/api/runs/run_broken", headers=H)
            assert shown.status_code != 200 or shown.json()["status"] == "failed"

    async def status() -> tuple[str, str | None]:
        db = Database(database_url)
        row = await DatabaseRunStore(db).row("run_broken")
        await db.dispose()
        assert row is not None
        return row.status, row.error

    got, error = asyncio.run(status())
    assert got == "failed" and "cannot be read back" in (error or "")


@pytest.fixture
def own_cluster() -> Iterator[tuple[Path, int, str]]:
    if pgcluster.find_bindir() is None:
        pytest.skip("no PostgreSQL server binaries to start a cluster that can be stopped")
    datadir = Path(tempfile.mkdtemp(prefix="hookgate-pg-stop-"))
    datadir.chmod(0o755)
    port = pgcluster.free_port()
    url = pgcluster.start(datadir, port)
    try:
        yield datadir, port, url
    finally:
        pgcluster.stop(datadir)


def test_a_database_that_goes_away_after_the_tool_ran_fails_the_run_once_it_is_back(
        own_cluster: tuple[Path, int, str], monkeypatch: pytest.MonkeyPatch) -> None:
    datadir, port, url = own_cluster
    # Away for longer than the event writes are tried again (the call's result waits for
    # the checkpoint after them, and a blip shorter than that only delays the run).
    monkeypatch.setattr(events_bus, "WRITE_RETRY_S", (0.1,))

    def stop_fast() -> None:
        # A fast shutdown: the test cluster commits asynchronously, and a crash would also
        # lose what was committed a moment before (the user's row), which is not the point.
        bindir = pgcluster.find_bindir()
        assert bindir is not None
        subprocess.run(pgcluster._as_pg_user([str(bindir / "pg_ctl"), "-D",
                                              str(datadir / "data"), "-m", "fast", "-w",
                                              "stop"]), check=True,
                       stdout=subprocess.DEVNULL)

    async def stop_database() -> str:
        await asyncio.to_thread(stop_fast)
        return "noted"

    dep, ran = deployment(url, [{"tool_calls": [{"name": "oa__note", "args": {"text": "x"}}]},
                                {"answer": "done"}], stop_database)
    with live_server(dep) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c)
        deadline = time.monotonic() + 30
        while not ran and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ran == ['"x"']
        time.sleep(1.5)  # the run tries to record its outcome while the database is away
        pgcluster.start(datadir, port)
        run = wait_run(c, run_id, timeout=60)
    assert run["status"] == "failed"
    assert not any(mark in run["error"] for mark in SQL_MARKS), run["error"]

    # After a restart the run is still failed, and the tool did not run again.
    dep2, ran2 = deployment(url, [{"answer": "never"}])
    with live_server(dep2) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        time.sleep(0.5)
        assert strict_json(c.get(f"/api/runs/{run_id}", headers=H).text)["status"] == "failed"
    assert ran2 == []
