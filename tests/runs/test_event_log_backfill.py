"""A run continued from its checkpoint writes to the event log the events its last process
checkpointed but never got into the log (it died between the two), so a call that is not
announced again on re-entry still shows in every stream once."""

from __future__ import annotations

import pytest

from hookgate.engines.events import RunEvent
from hookgate.storage.fencing import take_over
from hookgate.storage.runs import DatabaseRunStore
from tests.channels.world import buyer_runtime
from tests.server.counting_log import CountingLog


@pytest.mark.both_databases
async def test_checkpointed_events_missing_from_the_log_are_written_once(
        database_url: str) -> None:
    async with buyer_runtime(database_url) as (rt, state):
        m = rt.runs
        state.session_started = True
        state.status = "awaiting_approval"
        call = {"tool_call_id": "c1", "tool_name": "wire_transfer", "args": {"amount": 1}}
        state.trace = [RunEvent("run_started", {}, 1).to_dict(),
                       RunEvent("tool_call", call, 2).to_dict(),
                       RunEvent("confirmation_pending", {"request_id": "cr_x"}, 3).to_dict()]
        # Stored as an earlier version stored states, its trace inside (the server's store
        # now keeps traces in the log only).
        await DatabaseRunStore(rt.db).save(state)
        await m.bus.log.append(state.run_id, [RunEvent("run_started", {}, 1)])  # cut off

        assert await m.prepare(state) is not None
        assert await m.prepare(state) is not None  # a second continuation adds nothing
        logged = await m.bus.log.after(state.run_id)
        assert [(e.seq, e.type) for e in logged] == [
            (1, "run_started"), (2, "tool_call"), (3, "confirmation_pending")]
        assert logged[1].data == call


@pytest.mark.both_databases
async def test_a_later_executor_finds_what_the_log_holds(database_url: str) -> None:
    # Every event write is fenced and the fence counts takeovers: a later holder of a
    # run's fence, or a first one of a run that started (a state of an earlier version),
    # continues from what the log holds.
    reads = await first_and_later_executors_prepare(database_url)
    assert len(reads) == 3


@pytest.mark.perf  # how many log reads: a performance internal
@pytest.mark.both_databases
async def test_only_a_runs_first_executor_skips_reading_its_log(database_url: str) -> None:
    # The holder of token 1 of a run that never started is its first executor, with
    # nothing in the log to read.
    assert await first_and_later_executors_prepare(database_url) == [0, 1, 2]


async def first_and_later_executors_prepare(database_url: str) -> list[int]:
    """The log reads counted after each of three preparations: the first executor of a
    new run, a second executor of it, the first executor of a run started elsewhere."""
    reads: list[int] = []
    async with buyer_runtime(database_url) as (rt, state):
        m = rt.runs
        log = m.bus.log = CountingLog(rt.db)
        await m.store.save(state)
        fence = await take_over(rt.db, state.run_id)
        assert fence is not None and fence.token == 1
        assert await m.prepare(state, fence) is not None
        reads.append(log.reads)

        await m.bus.log.append(state.run_id, [RunEvent("session_start", {}, 1)], fence=fence)
        again = await take_over(rt.db, state.run_id)
        assert again is not None and again.token == 2
        assert await m.prepare(state, again) is not None
        assert [e["type"] for e in state.trace] == ["session_start"]
        reads.append(log.reads)

        started = state.model_copy(update={"run_id": "run_started_elsewhere",
                                           "session_started": True, "trace": []})
        await m.store.save(started)
        await m.bus.log.append(started.run_id, [RunEvent("session_start", {}, 1)])
        first = await take_over(rt.db, started.run_id)
        assert first is not None and first.token == 1
        await m.prepare(started, first)
        assert [e["type"] for e in started.trace] == ["session_start"]
        reads.append(log.reads)
    return reads
