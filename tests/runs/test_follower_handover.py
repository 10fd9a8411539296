"""A stream of a run that executes in the same process takes the events this process
committed from the bus, without reading the log again; a notification of events past
them (another instance's write), one that does not say how far, a gap, or the periodic
re-check sends it to the log. Run on a real database: the log's reads are counted."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from hookgate.engines.events import RunEvent
from hookgate.engines.state import RunState
from hookgate.runs.events_bus import EventBus
from hookgate.runs.notifications import Wakers
from hookgate.storage.database import Database
from hookgate.storage.fencing import Fence
from hookgate.storage.run_events import RunEventLog
from hookgate.storage.runs import DatabaseRunStore

pytestmark = pytest.mark.both_databases


class CountingLog(RunEventLog):
    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.reads = 0

    async def after(self, run_id: str, seq: int) -> list[RunEvent]:
        self.reads += 1
        return await super().after(run_id, seq)

    async def append(self, run_id: str, events: Sequence[RunEvent], *,
                     fence: Fence | None = None) -> None:
        await super().append(run_id, events, fence=fence)


async def running(db: Database, run_id: str) -> None:
    """The run's row, as a run in flight has one (a stream of no run ends at once)."""
    await DatabaseRunStore(db).save(RunState(run_id=run_id, agent_id="a"))


async def stream(bus: EventBus, run_id: str, out: list[RunEvent]) -> None:
    async for event in bus.subscribe(run_id):
        out.append(event)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0.01)


def event(kind: str, seq: int) -> RunEvent:
    return RunEvent(kind, {"n": seq}, seq)


async def test_a_local_run_streams_from_the_bus_after_the_first_read(db: Database) -> None:
    log = CountingLog(db)
    bus = EventBus(log)
    bus.followers = Wakers()
    await running(db, "run_h")
    bus.open("run_h", [])
    got: list[RunEvent] = []
    follower = asyncio.create_task(stream(bus, "run_h", got))
    await settle()
    assert log.reads == 1  # the first read: nothing yet

    for seq, kind in enumerate(("model_turn", "tool_call", "tool_result"), start=1):
        bus.publish("run_h", event(kind, seq))
        await bus.checkpoint("run_h", lambda batch: log.append("run_h", batch))
        # The instance's own notification of that write arrives too, and says how far.
        bus.followers.wake(f"run_h {seq}")
        await settle()
    assert [e.seq for e in got] == [1, 2, 3]
    assert log.reads == 1

    bus.publish("run_h", event("done", 4))
    await bus.checkpoint("run_h", lambda batch: log.append("run_h", batch))
    await asyncio.wait_for(follower, 5)
    assert [e.type for e in got][-1] == "done" and log.reads == 1


async def test_events_past_the_hand_over_or_an_unsaid_extent_are_read_from_the_log(
        db: Database) -> None:
    log = CountingLog(db)
    bus = EventBus(log)
    bus.followers = Wakers()
    await running(db, "run_r")
    got: list[RunEvent] = []
    follower = asyncio.create_task(stream(bus, "run_r", got))
    await settle()
    assert log.reads == 1

    # Another instance wrote seq 1-2 (no feed here): its notification says so.
    await log.append("run_r", [event("model_turn", 1), event("tool_call", 2)])
    bus.followers.wake("run_r 2")
    await settle()
    assert [e.seq for e in got] == [1, 2] and log.reads == 2

    # A notification of what the stream has already: nothing to read.
    bus.followers.wake("run_r 2")
    await settle()
    assert log.reads == 2

    # A hand-over with a gap (seq 3 was never handed over): the log fills it.
    await log.append("run_r", [event("tool_result", 3), event("model_turn", 4)])
    bus.followers.hand("run_r", [event("model_turn", 4)])
    await settle()
    assert [e.seq for e in got] == [1, 2, 3, 4] and log.reads == 3

    # A reconnect (None) or an older payload without a seq: read.
    await log.append("run_r", [event("answer", 5)])
    bus.followers.wake("run_r")
    await settle()
    assert [e.seq for e in got][-1] == 5 and log.reads == 4
    await log.append("run_r", [event("done", 6)])
    bus.followers.wake(None)
    await asyncio.wait_for(follower, 5)
    assert [e.seq for e in got] == [1, 2, 3, 4, 5, 6] and log.reads == 5


async def test_a_superseded_executor_in_the_same_process_writes_nothing_into_its_successor(
        db: Database) -> None:
    """A stalled job retried in the process that still runs it: two executors of one run
    side by side, the old one fenced out. Its events stay in its own feed, where its fence
    refuses them; its checkpoint takes none of the new one's events; closing it leaves the
    new feed open."""
    from hookgate.storage.fencing import take_over

    await running(db, "run_z")
    log = CountingLog(db)
    bus = EventBus(log)
    old_fence = await take_over(db, "run_z")
    assert old_fence is not None
    old = bus.open("run_z", [], fence=old_fence)
    new_fence = await take_over(db, "run_z")
    assert new_fence is not None
    new = bus.open("run_z", [], fence=new_fence)

    bus.publish("run_z", event("tool_result", 1), new)   # the new executor's first event
    bus.publish("run_z", event("zombie_note", 1), old)   # the old one, unaware, the same seq
    saved: list[list[str]] = []

    async def save(batch: Sequence[RunEvent]) -> None:
        saved.append([e.type for e in batch])

    await bus.checkpoint("run_z", save, fence=old_fence)  # the old one's checkpoint
    assert saved == [[]]  # it took none of the new executor's events
    await bus.close("run_z", old)
    assert bus.feeds["run_z"] is new
    await bus.checkpoint("run_z", lambda b: log.append("run_z", b, fence=new_fence),
                         fence=new_fence)
    await bus.close("run_z", new)
    assert [e.type for e in await log.after("run_z", 0)] == ["tool_result"]
    assert "run_z" not in bus.feeds
