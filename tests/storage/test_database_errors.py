"""Database errors name what failed but never the SQL or its parameters (they reach run
errors, observations and API answers), and keep their class (callers catch
IntegrityError)."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from hookgate.storage.database import Database
from hookgate.storage.ledger import DatabaseLedger
from hookgate.storage.tables import User

pytestmark = pytest.mark.both_databases

SECRET = "s3cr3t-value"


async def test_a_failed_statement_shows_neither_its_sql_nor_its_parameters(
        db: Database) -> None:
    with pytest.raises(SQLAlchemyError) as failed:
        async with db.engine.connect() as conn:
            await conn.execute(text("SELECT secret FROM no_such_table WHERE v = :v"),
                               {"v": SECRET})
    message = str(failed.value)
    assert "no_such_table" in message  # what failed is still said
    assert "SELECT" not in message and SECRET not in message and "[SQL" not in message


async def test_a_value_that_cannot_be_encoded_is_not_quoted(db: Database) -> None:
    with pytest.raises((SQLAlchemyError, UnicodeError)) as failed:
        async with db.transaction() as s:
            s.add(User(id="u\ud83d", org_id="x", name=f"{SECRET}\ud83d"))
    message = str(failed.value)
    assert SECRET not in message and "INSERT" not in message
    assert "surrogate" in message


async def test_integrity_errors_keep_their_class(db: Database) -> None:
    ledger = DatabaseLedger(db)
    assert await ledger.claim("run_1", "call_1", "t", "0" * 64) is None
    prior = await ledger.claim("run_1", "call_1", "t", "0" * 64)
    assert prior is not None and prior.observation is None
    with pytest.raises(IntegrityError) as failed:
        async with db.transaction() as s:
            s.add(User(id="dup", org_id="no-such-org", name=SECRET))
    assert SECRET not in str(failed.value) and "INSERT" not in str(failed.value)
