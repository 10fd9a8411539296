"""A run's events wait up to FLUSH_AFTER_S for its next checkpoint, which writes them in its
own transaction: a short step costs no event writes of its own. Events no checkpoint takes
are still written (after the wait, when the run's feed closes, after a failed checkpoint),
and a call whose announcement never reached the log (its process died first) is announced
once when the run resumes, and does not run again."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import httpx
import pytest

from hookgate import tool
from hookgate.engines.events import RunEvent
from hookgate.runs import events_bus
from hookgate.runs.events_bus import EventBus, RunFeed
from hookgate.storage.database import Database
from hookgate.storage.run_events import RunEventLog
from tests.channels.world import eventually, finished_run, start_run, world
from tests.live_server import live_server
from tests.server.counting_log import CountingLog


def feed_waiting(db: Database, monkeypatch: pytest.MonkeyPatch, seconds: float
                 ) -> tuple[EventBus, CountingLog, RunFeed]:
    """A bus whose events wait ``seconds`` for a checkpoint, and the feed of run_d."""
    monkeypatch.setattr(events_bus, "FLUSH_AFTER_S", seconds)
    log = CountingLog(db)
    bus = EventBus(log)
    return bus, log, bus.open("run_d", [])


def saver(log: RunEventLog, saved: list[list[int]]) -> Any:
    async def save(events: Sequence[RunEvent]) -> None:  # as a checkpoint does
        saved.append([e.seq for e in events])
        await RunEventLog.append(log, "run_d", events)
    return save


@pytest.mark.perf  # how many event writes: a performance internal
async def test_events_a_checkpoint_follows_soon_are_written_by_it(db: Database) -> None:
    log = CountingLog(db)
    bus = EventBus(log)
    bus.open("run_d", [])
    saved: list[list[int]] = []
    bus.publish("run_d", RunEvent("tool_call", {}, 1))
    await asyncio.sleep(0.01)  # the call runs
    bus.publish("run_d", RunEvent("tool_result", {}, 2))
    await bus.checkpoint("run_d", saver(log, saved))
    await asyncio.sleep(events_bus.FLUSH_AFTER_S * 2)  # no timer is left to fire
    await bus.close("run_d")
    assert saved == [[1, 2]] and log.alone == []
    assert [e.seq for e in await log.after("run_d")] == [1, 2]


async def test_events_no_checkpoint_takes_are_written_after_the_wait(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    bus, log, _ = feed_waiting(db, monkeypatch, 0.2)
    published = time.monotonic()
    bus.publish("run_d", RunEvent("tool_call", {}, 1))  # a long tool call: no checkpoint
    bus.publish("run_d", RunEvent("progress", {}, 2))
    await asyncio.sleep(0.05)
    assert log.alone == []  # still waiting for a checkpoint
    await eventually(lambda: log.alone, "the events written alone")
    assert time.monotonic() - published >= 0.2
    assert log.alone == [[1, 2]]  # one write for both
    bus.publish("run_d", RunEvent("tool_result", {}, 3))  # a new wait starts
    await eventually(lambda: len(log.alone) == 2, "the next event written alone")
    assert log.alone == [[1, 2], [3]]
    assert [e.seq for e in await log.after("run_d")] == [1, 2, 3]


async def test_closing_a_feed_writes_its_pending_events_without_waiting(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    bus, log, feed = feed_waiting(db, monkeypatch, 3600)
    bus.publish("run_d", RunEvent("answer", {}, 1))
    async with asyncio.timeout(5):
        await bus.close("run_d")
    assert log.alone == [[1]] and feed.timer is None
    assert [e.seq for e in await log.after("run_d")] == [1]


async def test_events_a_failed_checkpoint_took_are_written_alone_after_the_wait(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    bus, log, _ = feed_waiting(db, monkeypatch, 0.05)

    async def failing(events: Sequence[RunEvent]) -> None:
        raise ConnectionError("the database went away")

    bus.publish("run_d", RunEvent("tool_result", {}, 1))
    with pytest.raises(ConnectionError):
        await bus.checkpoint("run_d", failing)
    await eventually(lambda: log.alone, "the events written alone")
    assert [e.seq for e in await log.after("run_d")] == [1]


@pytest.mark.both_databases
async def test_a_call_announced_only_in_memory_is_announced_once_on_resume(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The process stops while its tool runs, its `tool_call` still waiting for the turn's
    # checkpoint, and the write on the way out fails too (as if it had died): the log
    # never gets the announcement. The next process announces the call once, and the
    # ledger keeps the tool from running a second time.
    monkeypatch.setattr(events_bus, "FLUSH_AFTER_S", 3600)
    # As many write attempts on the way out, with short pauses between them.
    monkeypatch.setattr(events_bus, "WRITE_RETRY_S", tuple(0.01 for _ in
                                                           events_bus.WRITE_RETRY_S))
    started: list[dict[str, Any]] = []
    in_tool = threading.Event()

    @tool(writes=True)
    async def wire_transfer(amount: float, vendor: str, api_token: str) -> str:
        """Send money to a vendor."""
        started.append({"amount": amount, "vendor": vendor})
        in_tool.set()
        await asyncio.sleep(3600)  # until its server stops
        return "sent"

    pay = {"amount": 100, "vendor": "acme", "api_token": "t"}
    deployment, _ = world(database_url, [], turns=[
        {"tool_calls": [{"name": "wire_transfer", "args": pay}]}, {"answer": "Done."}])
    deployment.agents["buyer"].tools = [wire_transfer]
    # PostgreSQL: the stopping worker cancels the tool at once (it would run for an hour).
    deployment.worker = replace(deployment.worker, shutdown_grace_s=0)
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            run_id = await start_run(client)
            await eventually(in_tool.is_set, "the tool call")
        log = srv.runtime.runs.bus.log
        logged = srv.call(log.after(run_id))
        # It waits in memory; on PostgreSQL the turn (and the call's announcement) is
        # stored with the call's claim, before the tool starts (docs: the durable path).
        carried = srv.runtime.db.backend.carries_ledger
        assert ("tool_call" in [e.type for e in logged]) is carried

        async def refused(*_: Any, **__: Any) -> None:
            raise ConnectionError("the process is gone")

        monkeypatch.setattr(log, "append", refused)  # its writes on the way out fail
    # Gone with the process: the log holds the turn, and the call only where its claim
    # carried it.
    assert await logged_types(database_url, run_id) == [
        "session_start", "model_turn", *(["tool_call"] if carried else [])]

    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            run = await finished_run(client, run_id)
    assert run["status"] == "completed", (run["error"], run["trace"])
    calls = [e for e in run["trace"] if e["type"] == "tool_call"]
    assert len(calls) == 1 and calls[0]["args"]["amount"] == 100, run["trace"]
    ends = [e for e in run["trace"] if e["type"] in ("tool_result", "tool_blocked")]
    assert len(ends) == 1, run["trace"]
    assert started == [{"amount": 100, "vendor": "ACME"}]  # ran once, not again
    assert [e["seq"] for e in run["trace"]] == list(range(1, len(run["trace"]) + 1))


async def logged_types(database_url: str, run_id: str) -> list[str]:
    """The run's logged event types, read on a connection of its own."""
    db = Database(database_url)
    try:
        return [e.type for e in await RunEventLog(db).after(run_id)]
    finally:
        await db.dispose()
