"""A ledger record known when it is claimed (an outside call's index entry, its start, a
session's record) is claimed and finished in one write: the first claim holds with its
record; a later one, or one after a claim still in progress, gets the earlier record back
and changes nothing (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from hookgate.storage.database import Database
from hookgate.storage.ledger import DatabaseLedger
from hookgate.tools.ledger import PriorExecution


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
