"""An executor presumed dead keeps writing after another took its run over: through every
write path a storage backend offers (a checkpoint with events, events alone, a checkpoint
inside a caller's transaction, a tool-call claim, a claim riding with a checkpoint), nothing
it sends lands, but the result of a tool it did run."""

from __future__ import annotations

import pytest

from hookgate.engines.events import RunEvent
from hookgate.engines.interrupts import Fenced
from hookgate.storage.backends.base import LedgerFinish
from hookgate.storage.database import Database
from hookgate.storage.fencing import take_over
from hookgate.storage.ledger import DatabaseLedger
from hookgate.storage.run_events import RunEventLog
from hookgate.storage.run_writes import Checkpoint, write_in_session, write_run
from hookgate.storage.runs import DatabaseRunStore
from tests.adversarial_tally import Tally


def _row(status: str) -> Checkpoint:
    return Checkpoint(("r1", "agent", None, None, None, "react", status, "{}", None, None,
                       None))


@pytest.mark.both_databases
async def test_a_stale_executor_writes_nothing_on_any_path(db: Database,
                                                           attempt: Tally) -> None:
    await write_run(db, "r1", checkpoint=_row("running"), events=[], fence=None)
    stale = await take_over(db, "r1")
    current = await take_over(db, "r1")
    assert stale is not None and current is not None
    late = [RunEvent("tool_call", {"name": "wire_money"}, 1)]

    async def checkpoint_with_events() -> None:
        await write_run(db, "r1", checkpoint=_row("completed"), events=late, fence=stale)

    async def events_alone() -> None:
        await write_run(db, "r1", checkpoint=None, events=late, fence=stale)

    async def in_a_callers_transaction() -> None:
        async with db.transaction() as s:
            await write_in_session(db, s, "r1", checkpoint=_row("completed"), events=late,
                                   fence=stale)

    async def claim_a_tool_call() -> None:
        await DatabaseLedger(db).claim("r1", "call-1", "wire_money", "d", fence=stale)

    async def claim_with_a_checkpoint() -> None:
        await write_run(db, "r1", checkpoint=_row("completed"), events=late, fence=stale,
                        claim=("r1", "call-1", "wire_money", "d"))

    paths = [("checkpoint with events", checkpoint_with_events),
             ("events alone", events_alone),
             ("checkpoint in a caller's transaction", in_a_callers_transaction),
             ("tool-call claim", claim_a_tool_call)]
    if db.backend.carries_ledger:
        paths.append(("tool-call claim with a checkpoint", claim_with_a_checkpoint))
    for name, write in paths:
        try:
            await write()
        except Fenced:
            got_through = False
        else:
            got_through = True
        attempt.record(f"stale executor: {name}", got_through)
        assert not got_through, name
    assert await RunEventLog(db).after("r1") == []
    assert await DatabaseLedger(db).recorded("r1", "call-1") is None
    summary = await DatabaseRunStore(db).summary("r1")
    assert summary is not None and summary.status == "running"


@pytest.mark.both_databases
async def test_a_stale_executor_keeps_the_result_of_a_tool_it_ran_and_nothing_else(
        db: Database, attempt: Tally) -> None:
    # Its tool ran before the takeover: the result rides with a checkpoint the fence
    # refuses, and lands on its claim alone (a retried run reuses it, never reruns it).
    await write_run(db, "r1", checkpoint=_row("running"), events=[], fence=None)
    stale = await take_over(db, "r1")
    assert stale is not None
    assert await DatabaseLedger(db).claim("r1", "call-1", "wire_money", "d", fence=stale) \
        is None
    assert await take_over(db, "r1") is not None
    late = [RunEvent("tool_result", {"tool_call_id": "call-1"}, 1)]
    try:
        await write_run(db, "r1", checkpoint=_row("completed"), events=late, fence=stale,
                        finishes=[LedgerFinish("r1", "call-1", "sent", True)])
    except Fenced:
        got_through = False
    else:
        got_through = True
    attempt.record("stale executor: checkpoint carrying a tool's result", got_through)
    assert not got_through
    assert await RunEventLog(db).after("r1") == []
    summary = await DatabaseRunStore(db).summary("r1")
    assert summary is not None and summary.status == "running"
    recorded = await DatabaseLedger(db).recorded("r1", "call-1")
    assert recorded is not None and (recorded.observation, recorded.ok) == ("sent", True)
