"""The server stores a run's trace once, in the event log: its checkpoints leave the trace
out of the stored state, and every reader (the API, a restart, a takeover, a failure) gets the
whole trace from the log, in order, each event once."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from hookgate.engines.events import RunEvent
from hookgate.engines.state import RunState
from hookgate.runs import events_bus
from hookgate.runs.events_bus import EventBus
from hookgate.storage.database import Database
from hookgate.storage.run_events import RunEventLog
from hookgate.storage.runs import DatabaseRunStore
from tests.channels.world import (
    auth,
    buyer_runtime,
    eventually,
    finished_run,
    requests,
    start_run,
    world,
)
from tests.live_server import live_server


def stored_state(srv: Any, run_id: str) -> dict[str, Any]:
    row = srv.call(srv.runtime.runs.store.row(run_id))
    assert row is not None
    return dict(json.loads(row.state_json))


def logged(srv: Any, run_id: str) -> list[dict[str, Any]]:
    return [e.to_dict() for e in srv.call(srv.runtime.runs.bus.log.after(run_id, 0))]


async def parked(client: httpx.AsyncClient, run_id: str) -> dict[str, Any] | None:
    body: dict[str, Any] = (await client.get(f"/api/runs/{run_id}", headers=auth("alice"))).json()
    return body if body["status"] == "awaiting_approval" else None


def contiguous(trace: list[dict[str, Any]]) -> None:
    assert [e["seq"] for e in trace] == list(range(1, len(trace) + 1)), trace


@pytest.mark.both_databases
async def test_a_run_across_a_restart_stores_its_trace_once_and_shows_it_whole(
        database_url: str) -> None:
    deployment, bank = world(database_url, [])
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            run_id = await start_run(client)
            [pending] = await eventually(lambda: requests(client, "pending"),
                                         "a pending request")
            # The request is stored before the run parks on it: wait for the checkpoint.
            waiting = await eventually(lambda: parked(client, run_id), "the run to park")
            before = logged(srv, run_id)
            state = stored_state(srv, run_id)
    assert "trace" not in state and state["status"] == "awaiting_approval"
    assert waiting["trace"] == before
    assert [e["type"] for e in before].count("confirmation_pending") == 1
    contiguous(before)

    # A new process continues the run from the stored state and the log.
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            r = await client.post(f"/api/confirmations/{pending['id']}/respond",
                                  json={"decision": "approve", "via": "inbox"},
                                  headers=auth("alice"))
            assert r.status_code == 200, r.text
            run = await finished_run(client, run_id)
            after = logged(srv, run_id)
            state = stored_state(srv, run_id)
            loaded = srv.call(srv.runtime.runs.store.load(run_id))
    assert run["status"] == "completed" and len(bank.transfers) == 1
    assert "trace" not in state and state["status"] == "completed"
    assert run["trace"] == after and loaded.trace == after
    assert after[:len(before)] == before  # the resumed run went on after what was logged
    contiguous(after)
    types = [e["type"] for e in after]
    assert types.count("tool_call") == 1 and types.count("tool_result") == 1
    assert types.count("done") == 1 and types[-1] == "done"


@pytest.mark.both_databases
async def test_a_run_failed_because_its_checkpoint_failed_logs_its_end_after_every_event(
        database_url: str) -> None:
    async with buyer_runtime(database_url) as (rt, state):
        m = rt.runs
        first = RunEvent("run_started", {}, 1)
        state.trace.append(first.to_dict())
        await m.store.save(state, events=[first])
        # Two more events were emitted in memory and never reached the log.
        state.trace += [RunEvent("tool_call", {"tool_call_id": "c1"}, 2).to_dict(),
                        RunEvent("error", {"error": "x"}, 3).to_dict()]
        await m.store.record_failure(state, "the checkpoint could not be written")

        row = await m.store.row(state.run_id)
        assert row is not None and row.status == "failed"
        assert "trace" not in json.loads(row.state_json)
        ends = [(e.seq, e.type) for e in await m.bus.log.after(state.run_id, 0)]
        assert ends == [(1, "run_started"), (4, "error"), (5, "done")]
        loaded = await m.store.load(state.run_id)
        assert loaded is not None and loaded.error == "the checkpoint could not be written"
        assert [e["type"] for e in loaded.trace] == ["run_started", "error", "done"]


async def test_events_the_log_refused_after_every_retry_go_with_the_next_checkpoint(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    # The log is the only place a run's trace is kept: a batch the database refused (here a
    # trigger refuses every event row) must not be dropped when the retries run out.
    monkeypatch.setattr(events_bus, "WRITE_RETRY_S", (0.01, 0.01))
    monkeypatch.setattr(events_bus, "FLUSH_AFTER_S", 0.01)
    store = DatabaseRunStore(db, trace_in_log=True)
    bus = EventBus(RunEventLog(db))
    state = RunState(agent_id="buyer", message="pay")
    await store.save(state)
    feed = bus.open(state.run_id, [])
    async with db.transaction() as s:
        await s.execute(text("CREATE TRIGGER refuse BEFORE INSERT ON run_events "
                             "BEGIN SELECT RAISE(ABORT, 'refused'); END"))
    for event in (RunEvent("run_started", {}, 1), RunEvent("tool_call", {"x": 1}, 2)):
        state.trace.append(event.to_dict())
        bus.publish(state.run_id, event)
    # No checkpoint takes them: written alone, soon.
    await eventually(lambda: feed.flushing is not None, "the flush")
    assert feed.flushing is not None
    await feed.flushing
    assert await bus.log.after(state.run_id) == []  # refused every time

    async with db.transaction() as s:
        await s.execute(text("DROP TRIGGER refuse"))
    state.status = "completed"
    await bus.checkpoint(state.run_id, lambda events: store.save(state, events=events))
    logged = [(e.seq, e.type) for e in await bus.log.after(state.run_id)]
    assert logged == [(1, "run_started"), (2, "tool_call")]
    loaded = await store.load(state.run_id)
    assert loaded is not None and loaded.status == "completed"
    assert [e["type"] for e in loaded.trace] == ["run_started", "tool_call"]
