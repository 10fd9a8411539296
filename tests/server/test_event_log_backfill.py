"""A run continued from its checkpoint writes to the event log the events its last process
checkpointed but never got into the log (it died between the two), so a call that is not
announced again on re-entry still shows in every stream once."""

from __future__ import annotations

import pytest

from hookgate.engines.events import RunEvent
from hookgate.storage.runs import DatabaseRunStore
from tests.channels.world import buyer_runtime


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
