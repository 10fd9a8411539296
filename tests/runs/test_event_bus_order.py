"""Events and checkpoints leave the bus in seq order, and the events a checkpoint follows are
written in its transaction: a `done` is never logged by a plain flush ahead of the
checkpoint that stores the status it announces (readers of the log would see the run end
while its row still says running)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from hookgate.engines.events import RunEvent
from hookgate.runs import events_bus
from hookgate.runs.events_bus import EventBus
from hookgate.storage.database import Database
from hookgate.storage.fencing import Fence
from hookgate.storage.run_events import RunEventLog


@pytest.fixture(autouse=True)
def flush_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Events go out on the next turn of the loop, not after waiting for a checkpoint:
    # these tests order flushes and checkpoints step by step.
    monkeypatch.setattr(events_bus, "FLUSH_AFTER_S", 0)


class GatedLog(RunEventLog):
    """An event log whose first append waits for ``gate`` (a slow write in flight)."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.gate = asyncio.Event()
        self.appended: list[list[int]] = []

    async def append(self, run_id: str, events: Sequence[RunEvent], *,
                     fence: Fence | None = None) -> None:
        self.appended.append([e.seq for e in events])
        if len(self.appended) == 1:
            await self.gate.wait()


async def test_a_flush_queued_behind_checkpoints_leaves_their_events_to_them(
        db: Database) -> None:
    log = GatedLog(db)
    bus = EventBus(log)
    bus.open("run_o", [])
    saved: list[list[int]] = []
    release_first_save = asyncio.Event()

    async def save(events: Sequence[RunEvent]) -> None:
        saved.append([e.seq for e in events])
        if len(saved) == 1:
            await release_first_save.wait()

    async def run() -> None:  # as the driver does: a turn's checkpoint, then the end
        bus.publish("run_o", RunEvent("tool_result", {}, 2))
        await bus.checkpoint("run_o", save)
        bus.publish("run_o", RunEvent("done", {"status": "completed"}, 3))
        await bus.checkpoint("run_o", save)

    bus.publish("run_o", RunEvent("tool_call", {}, 1))   # a flush starts writing seq 1
    for _ in range(3):  # the timer fires, its task starts
        await asyncio.sleep(0)
    assert log.appended == [[1]]
    driver = asyncio.create_task(run())  # its first checkpoint waits behind the flush
    for _ in range(3):
        await asyncio.sleep(0)
    log.gate.set()  # the flush ends; it queues again behind the checkpoint for seq 2
    for _ in range(5):
        await asyncio.sleep(0)
    assert saved == [[2]]
    release_first_save.set()
    await driver

    assert saved == [[2], [3]]
    assert log.appended == [[1]]  # `done` went with the checkpoint, not a flush
    await bus.close("run_o")
    assert log.appended == [[1]]


async def test_events_a_failed_checkpoint_took_are_written_later(db: Database) -> None:
    log = GatedLog(db)
    log.gate.set()
    bus = EventBus(log)
    bus.open("run_f", [])

    async def failing(events: Sequence[RunEvent]) -> None:
        raise ConnectionError("the database went away")

    bus.publish("run_f", RunEvent("answer", {}, 1))
    try:
        await bus.checkpoint("run_f", failing)
    except ConnectionError:
        pass
    else:
        raise AssertionError("the checkpoint's failure must reach the run")
    await bus.close("run_f")
    assert log.appended == [[1]]
