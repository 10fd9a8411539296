"""A stream of a run's events registers for the run's wake-ups before the API's visibility
check, which reads the run's first events with its row (one statement on PostgreSQL): the
stream starts from that read, unless something came after it, and no registration outlives
its request, whether it was refused or streamed to the end."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Sequence

import httpx
import pytest

from hookgate.engines.events import RunEvent
from hookgate.engines.interrupts import Fenced
from hookgate.runs import events_bus
from hookgate.runs.events_bus import EventBus
from hookgate.runs.notifications import Wakers
from hookgate.storage.database import Database
from hookgate.storage.run_events import RunEventLog
from tests.channels.world import auth, eventually, finished_run, start_run, world
from tests.live_server import live_server
from tests.server.counting_log import CountingLog


def following_bus(db: Database) -> tuple[EventBus, CountingLog]:
    log = CountingLog(db)
    bus = EventBus(log)
    bus.followers = Wakers()
    return bus, log


async def take(stream: AsyncIterator[RunEvent], n: int) -> list[int]:
    async with asyncio.timeout(3):  # well under FOLLOW_RECHECK_S: no re-check needed
        return [(await anext(stream)).seq for _ in range(n)]


@pytest.fixture(autouse=True)
def slow_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events_bus, "FOLLOW_RECHECK_S", 3600)


async def test_the_stream_starts_from_the_callers_read(db: Database) -> None:
    bus, log = following_bus(db)
    await log.append("run_s", [RunEvent("session_start", {}, 1)])
    me = bus.follow("run_s")
    first = await RunEventLog(db).after("run_s", 0)  # the caller's read, after registering
    stream = bus.subscribe("run_s", 0, status_before="running", follower=me, logged=first)
    assert await take(stream, 1) == [1]
    assert log.reads == 0  # the caller's read stood for the stream's first
    await log.append("run_s", [RunEvent("tool_call", {}, 2)])
    assert bus.followers is not None
    bus.followers.wake("run_s 2")
    assert await take(stream, 1) == [2]
    await stream.aclose()
    assert "run_s" not in bus.followers


async def test_events_committed_after_the_callers_read_are_not_missed(db: Database) -> None:
    bus, log = following_bus(db)
    await log.append("run_s", [RunEvent("session_start", {}, 1)])
    me = bus.follow("run_s")
    first = await RunEventLog(db).after("run_s", 0)
    # Committed after the read, its notification in before the stream starts: the stream
    # reads the log instead of trusting the read, which has not got it.
    await log.append("run_s", [RunEvent("tool_call", {}, 2)])
    assert bus.followers is not None
    bus.followers.wake("run_s 2")
    stream = bus.subscribe("run_s", 0, status_before="running", follower=me, logged=first)
    assert await take(stream, 2) == [1, 2]
    assert log.reads == 1
    await stream.aclose()


async def test_a_run_that_had_ended_silently_ends_the_stream_at_once(db: Database) -> None:
    # Ended without a `done` (it could not resume): the status read with the (empty) log
    # says so, and the stream ends without waiting for a wake-up.
    bus, log = following_bus(db)
    me = bus.follow("run_s")
    stream = bus.subscribe("run_s", 0, status_before="failed", follower=me, logged=[])
    async with asyncio.timeout(3):
        assert [e async for e in stream] == []
    assert log.reads == 0


async def test_events_handed_after_the_callers_read_are_not_repeated(db: Database) -> None:
    bus, log = following_bus(db)
    me = bus.follow("run_s")
    first = await RunEventLog(db).after("run_s", 0)  # nothing yet
    batch = [RunEvent("session_start", {}, 1), RunEvent("tool_call", {}, 2)]
    await log.append("run_s", batch)
    assert bus.followers is not None
    bus.followers.hand("run_s", batch)  # this process committed them
    stream = bus.subscribe("run_s", 0, status_before="running", follower=me, logged=first)
    assert await take(stream, 2) == [1, 2]
    assert log.reads == 0  # what was handed follows the read without a gap
    await log.append("run_s", [RunEvent("done", {"status": "completed"}, 3)])
    bus.followers.wake("run_s 3")
    assert await take(stream, 1) == [3]  # and then the stream ends
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


@pytest.mark.both_databases
async def test_no_registration_outlives_its_request(database_url: str) -> None:
    deployment, _ = world(database_url, [], turns=[{"answer": "Nothing to pay."}])
    with live_server(deployment) as srv:
        bus = srv.runtime.runs.bus
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            run_id = await start_run(client)
            await finished_run(client, run_id)
            url = f"/api/runs/{run_id}/events"
            refused = await client.get(url, headers=auth("mallory"))  # another org
            assert refused.status_code == 404
            bad = await client.get(url, headers={**auth("alice"), "Last-Event-ID": "x"})
            assert bad.status_code == 422
            ended = await client.get(url, headers=auth("alice"))
            assert ended.status_code == 200 and "event: done" in ended.text

            async def registered() -> bool:  # on the server's loop
                gc.collect()
                return bus.followers is not None and run_id in bus.followers

            assert not srv.call(registered())


async def stream_of_a_run_advancing_here(db: Database) -> tuple[
        EventBus, CountingLog, AsyncIterator[RunEvent], asyncio.Task[list[int]]]:
    """A stream of run_s, whose feed is open here, past its first read and waiting for its
    first event."""
    bus, log = following_bus(db)
    bus.open("run_s", [])
    stream = bus.subscribe("run_s", 0, status_before="running")
    waiting = asyncio.create_task(take(stream, 1))
    await asyncio.sleep(0.05)
    return bus, log, stream, waiting


async def test_a_notification_of_this_processs_own_write_waits_for_its_events(
        db: Database) -> None:
    # The write's notification can reach the stream before the write returns: the stream
    # then waits for the events the write hands it instead of reading the log for them.
    bus, log, stream, waiting = await stream_of_a_run_advancing_here(db)
    assert log.reads == 1  # the stream's first read: nothing yet

    async def save(events: Sequence[RunEvent]) -> None:
        await RunEventLog.append(log, "run_s", events)
        assert bus.followers is not None
        bus.followers.wake("run_s 1")  # the commit's notification, ahead of the return
        await asyncio.sleep(0.05)

    bus.publish("run_s", RunEvent("tool_call", {}, 1))
    await bus.checkpoint("run_s", save)
    assert await waiting == [1]
    assert log.reads == 1
    await stream.aclose()


async def test_a_failed_write_of_this_process_sends_its_streams_to_the_log(
        db: Database) -> None:
    # This executor's write is refused (it was taken over) while the run's new executor,
    # elsewhere, commits the same seq: the stream reads it from the log at once.
    bus, log, stream, waiting = await stream_of_a_run_advancing_here(db)

    async def refused(events: Sequence[RunEvent]) -> None:
        await RunEventLog.append(log, "run_s", [RunEvent("tool_call", {"by": "b"}, 1)])
        assert bus.followers is not None
        bus.followers.wake("run_s 1")  # the other instance's notification
        await asyncio.sleep(0.05)
        raise Fenced("run_s was taken over")

    bus.publish("run_s", RunEvent("tool_call", {"by": "a"}, 1))
    with pytest.raises(Fenced):
        await bus.checkpoint("run_s", refused)
    assert await waiting == [1]
    assert log.reads == 2
    await stream.aclose()


async def test_a_run_advancing_here_is_read_from_its_feed_as_committed(db: Database) -> None:
    bus, log = following_bus(db)
    assert bus.live("run_l", 0) is None  # not advancing here: the caller reads the log
    feed = bus.open("run_l", [RunEvent("session_start", {}, 1)], org_id="acme")
    bus.publish("run_l", RunEvent("model_turn", {}, 2), feed)
    await bus.checkpoint("run_l", lambda batch: log.append("run_l", batch))
    bus.publish("run_l", RunEvent("tool_call", {}, 3), feed)  # emitted, not yet committed
    live = bus.live("run_l", 0)
    assert live is not None and live.org_id == "acme"
    assert [e.seq for e in live.logged] == [1, 2]  # what the log holds, nothing more
    assert [e.seq for e in (bus.live("run_l", 1) or live).logged] == [2]
    await bus.close("run_l", feed)
    assert bus.live("run_l", 0) is None
    assert log.reads == 0


@pytest.mark.both_databases
async def test_a_run_in_flight_here_is_streamed_to_its_org_only(database_url: str) -> None:
    # SQLite holds the waiting call in this process (the run's feed is open: its first
    # read comes from the feed); PostgreSQL parks the run (its row is read). Either way a
    # caller of another org is told there is no such run.
    deployment, _ = world(database_url, [])
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            run_id = await start_run(client)

            async def asked() -> bool:
                r = await client.get("/api/confirmations?status=pending",
                                     headers=auth("alice"))
                return any(x["run_id"] == run_id for x in r.json())

            await eventually(asked, "the run's request")
            feeds = srv.runtime.runs.bus.feeds
            if database_url.startswith("sqlite"):
                assert feeds.get(run_id) is not None
            else:  # the request is visible a moment before the run has parked
                await eventually(lambda: feeds.get(run_id) is None, "the run to park")
            url = f"/api/runs/{run_id}/events"
            refused = await client.get(url, headers=auth("mallory"))
            assert refused.status_code == 404 and run_id in refused.text
            kinds: list[str] = []
            async with client.stream("GET", url, headers=auth("alice")) as r:
                assert r.status_code == 200
                async for line in r.aiter_lines():
                    if line.startswith("event: "):
                        kinds.append(line[7:])
                        if kinds[-1] == "confirmation_pending":
                            break
            assert kinds[0] == "session_start" and kinds[-1] == "confirmation_pending"


@pytest.mark.both_databases
async def test_a_run_that_just_ended_here_is_read_by_its_org_only(database_url: str) -> None:
    # The run's end is kept in this process's memory (storage/ended_runs.py): reading it
    # from there must answer another org as the database would, with nothing.
    deployment, _ = world(database_url, [], turns=[{"answer": "Nothing to pay."}])
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            run_id = await start_run(client)
            await finished_run(client, run_id)
            assert srv.runtime.runs.store.ended is not None
            assert srv.runtime.runs.store.ended.get(run_id) is not None  # from memory
            for url in (f"/api/runs/{run_id}", f"/api/runs/{run_id}/events"):
                refused = await client.get(url, headers=auth("mallory"))
                assert refused.status_code == 404 and "Nothing to pay" not in refused.text
            same_org = await client.get(f"/api/runs/{run_id}", headers=auth("bob"))
            assert same_org.status_code == 200
            assert same_org.json()["answer"] == "Nothing to pay."
