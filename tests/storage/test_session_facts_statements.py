"""A session's facts on the fast path: a request is kept once per session in ONE statement
(the check and the insert together, no ORM transaction), on SQLite and PostgreSQL alike."""

from __future__ import annotations

import pytest

from hookgate.provenance import Fact, FactKind
from hookgate.storage.database import Database
from hookgate.storage.session_facts import DatabaseFacts


@pytest.mark.both_databases
async def test_a_request_is_kept_once_per_session(db: Database) -> None:
    facts = DatabaseFacts(db)
    await facts.add("s-1", Fact.request("mail bob"))
    await facts.add("s-1", Fact.request("mail bob"))  # the same request: not kept again
    await facts.add("s-1", Fact.request("mail carol"))  # another request of the session
    await facts.add("s-2", Fact.request("mail bob"))  # the same request in another session
    result = Fact.result("read_page", "mail bob", trusted=False, call_id="c1")
    await facts.add("s-1", result)
    await facts.add("s-1", result)  # results are kept each time
    assert await facts.facts("s-1") == [
        Fact.request("mail bob"), Fact.request("mail carol"), result, result]
    assert await facts.facts("s-2") == [Fact.request("mail bob")]


@pytest.mark.perf  # a count of statements: a performance internal
@pytest.mark.both_databases
async def test_a_request_fact_sends_no_statement_through_sqlalchemy(db: Database) -> None:
    facts = DatabaseFacts(db)
    before = db.queries  # every statement that goes through SQLAlchemy
    await facts.add("s-1", Fact.request("mail bob"))
    await facts.add("s-1", Fact.request("mail bob"))
    # The check and the insert are one statement on the backend's driver (an ORM
    # transaction before: a read and an insert between BEGIN and COMMIT).
    assert db.queries == before
    assert await facts.facts("s-1") == [Fact.request("mail bob")]


@pytest.mark.both_databases
async def test_a_request_whose_text_differs_only_in_kind_is_still_kept(db: Database) -> None:
    facts = DatabaseFacts(db)
    await facts.add("s-1", Fact.result("read_page", "mail bob", trusted=True, call_id="c1"))
    await facts.add("s-1", Fact.request("mail bob"))  # a result with its text is no request
    kinds = [f.kind for f in await facts.facts("s-1")]
    assert kinds == [FactKind.RESULT, FactKind.REQUEST]


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_a_session_name_too_long_for_its_column_is_refused_not_cut(db: Database) -> None:
    facts = DatabaseFacts(db)
    # The driver's own error on the fast path (the ORM's wrapped it): the run fails closed
    # saying so (driver.FactsUnavailable), as before.
    with pytest.raises(Exception, match="too long"):
        await facts.add("s" * 300, Fact.request("mail bob"))
    assert await facts.facts("s" * 256) == []
