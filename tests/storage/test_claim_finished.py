"""A ledger record known when it is claimed (an outside call's index entry, its start, a
session's record) is claimed and finished in one write: the first claim holds with its
record; a later one, or one after a claim still in progress, gets the earlier record back
and changes nothing (SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest

from hookgate.storage.database import Database
from hookgate.storage.ledger import DatabaseLedger
from hookgate.tools.ledger import FinishedCall, PriorExecution


@pytest.mark.both_databases
async def test_the_first_claim_holds_with_its_record_and_a_later_one_changes_nothing(
        db: Database) -> None:
    ledger = DatabaseLedger(db)
    assert await ledger.claim_finished("r1", "started-1", "search", "d1", '{"a": 1}',
                                       False) is None
    kept = PriorExecution('{"a": 1}', False, "search", "d1")
    assert await ledger.recorded("r1", "started-1") == kept
    # Another claim of the same entry: the first record back, nothing overwritten.
    assert await ledger.claim_finished("r1", "started-1", "other", "d2", "later",
                                       True) == kept
    assert await ledger.recorded("r1", "started-1") == kept
    # A plain claim sees it as claimed and done.
    assert await ledger.claim("r1", "started-1", "search", "d1") == kept


@pytest.mark.both_databases
async def test_after_a_claim_in_progress_it_gets_that_claim_back(db: Database) -> None:
    ledger = DatabaseLedger(db)
    assert await ledger.claim("r1", "index-1", "search", "d1") is None
    in_progress = PriorExecution(None, None, "search", "d1")
    assert await ledger.claim_finished("r1", "index-1", "search", "d1", "record",
                                       True) == in_progress
    assert await ledger.recorded("r1", "index-1") == in_progress
    await ledger.finish("r1", "index-1", "record", True)
    assert await ledger.recorded("r1", "index-1") == PriorExecution("record", True, "search",
                                                                    "d1")


@pytest.mark.both_databases
async def test_finishes_known_together_land_in_order_and_on_sqlite_in_one_write(
        db: Database) -> None:
    """A report's start record and its report record are finished together
    (`DatabaseLedger.finish_all`): each lands as `finish` would; on SQLite one transaction
    carries both, so a failing later one leaves the earlier one unfinished too."""
    ledger = DatabaseLedger(db)
    for key in ("started-1", "report-1", "started-2", "report-2"):
        assert await ledger.claim("r1", key, "search", "d1") is None
    await ledger.finish_all([FinishedCall("r1", "started-1", "kept", False),
                             FinishedCall("r1", "report-1", "kept", True)])
    assert await ledger.recorded("r1", "started-1") == PriorExecution("kept", False, "search",
                                                                      "d1")
    assert await ledger.recorded("r1", "report-1") == PriorExecution("kept", True, "search",
                                                                     "d1")
    unbindable: Any = object()
    with pytest.raises(Exception):  # noqa: B017 (each driver says it its own way)
        await ledger.finish_all([FinishedCall("r1", "started-2", "kept", True),
                                 FinishedCall("r1", "report-2", unbindable, True)])
    expected = None if db.backend.dialect == "sqlite" else "kept"
    assert (await ledger.recorded("r1", "started-2")) == PriorExecution(
        expected, None if expected is None else True, "search", "d1")
