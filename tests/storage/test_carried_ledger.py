"""A checkpoint that carries the ledger (``write_run`` with ``claim`` and ``finishes``): the
claim and the turn's checkpoint land together, a second claim of the same call gets the
first one's record back, and a call's result lands with the checkpoint after it, in one
transaction each (on PostgreSQL one statement)."""

from __future__ import annotations

import pytest

from hookgate.engines.events import RunEvent
from hookgate.storage.backends.base import LedgerFinish
from hookgate.storage.database import Database
from hookgate.storage.fencing import take_over
from hookgate.storage.ledger import DatabaseLedger
from hookgate.storage.run_events import RunEventLog
from hookgate.storage.run_writes import Checkpoint, write_run
from hookgate.storage.runs import DatabaseRunStore

CALL = ("r1", "call-1", "wire_money", "digest")


def _row(status: str) -> Checkpoint:
    return Checkpoint(("r1", "agent", None, None, None, "react", status, "{}", None, None,
                       None))


@pytest.mark.both_databases
async def test_a_claim_lands_with_its_turn_and_a_result_with_the_next_checkpoint(
        db: Database) -> None:
    await write_run(db, "r1", checkpoint=_row("running"), events=[], fence=None)
    fence = await take_over(db, "r1")
    assert fence is not None
    turn = [RunEvent("model_turn", {"step": 1}, 1), RunEvent("tool_call", {"id": "call-1"}, 2)]
    assert await write_run(db, "r1", checkpoint=_row("running"), events=turn, fence=fence,
                           claim=CALL) is None  # claimed by this statement
    assert [e.type for e in await RunEventLog(db).after("r1")] == ["model_turn", "tool_call"]
    claimed = await DatabaseLedger(db).recorded("r1", "call-1")
    assert claimed is not None and claimed.observation is None

    # The same call again (a resumed run re-entering it): the earlier claim comes back.
    again = await write_run(db, "r1", checkpoint=_row("running"), events=[], fence=fence,
                            claim=CALL)
    assert again is not None and (again.tool_name, again.observation) == ("wire_money", None)

    result = [RunEvent("tool_result", {"id": "call-1"}, 3)]
    assert await write_run(db, "r1", checkpoint=_row("running"), events=result, fence=fence,
                           finishes=[LedgerFinish("r1", "call-1", "sent", True)]) is None
    done = await DatabaseLedger(db).recorded("r1", "call-1")
    assert done is not None and (done.observation, done.ok) == ("sent", True)
    assert len(await RunEventLog(db).after("r1")) == 3
    summary = await DatabaseRunStore(db).summary("r1")
    assert summary is not None and summary.status == "running"


@pytest.mark.both_databases
async def test_the_results_of_several_calls_land_each_on_its_own_record_with_one_checkpoint(
        db: Database) -> None:
    # A turn's calls finished together: each finish is written to its own record, by its
    # whole key (decision record 0047), with the next call's claim in the same write.
    await write_run(db, "r1", checkpoint=_row("running"), events=[], fence=None)
    fence = await take_over(db, "r1")
    assert fence is not None
    for n in (1, 2, 3):
        assert await write_run(db, "r1", checkpoint=_row("running"), events=[], fence=fence,
                               claim=("r1", f"call-{n}", "wire_money", f"digest-{n}")) is None
    finishes = [LedgerFinish("r1", "call-1", "sent 1", True),
                LedgerFinish("r1", "call-2", "refused", False),
                LedgerFinish("r1", "call-3", "sent 3", True)]
    assert await write_run(db, "r1", checkpoint=_row("running"), events=[], fence=fence,
                           finishes=finishes,
                           claim=("r1", "call-4", "wire_money", "digest-4")) is None
    ledger = DatabaseLedger(db)
    for finish in finishes:
        done = await ledger.recorded("r1", finish.tool_call_id)
        assert done is not None
        assert (done.observation, done.ok) == (finish.observation, finish.ok), finish
    untouched = await ledger.recorded("r1", "call-4")
    assert untouched is not None and untouched.observation is None  # claimed, not finished
    # A finish of a record that is not there writes nothing, and the others still land.
    assert await write_run(db, "r1", checkpoint=_row("running"), events=[], fence=fence,
                           finishes=[LedgerFinish("r1", "ghost", "x", True),
                                     LedgerFinish("r1", "call-4", "sent 4", True)]) is None
    assert await ledger.recorded("r1", "ghost") is None
    last = await ledger.recorded("r1", "call-4")
    assert last is not None and last.observation == "sent 4"
