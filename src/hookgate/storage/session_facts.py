"""The ``session_facts`` table: the database `FactStore` (hookgate.provenance) every path
keeps a session's request and tool results in, on SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Sequence

from hookgate.provenance import Fact, FactKind
from hookgate.storage.backends.base import FactRow
from hookgate.storage.database import Database
from hookgate.tools.ledger import FinishedCall


class DatabaseFacts:
    """Facts kept in the database, so every process of a deployment reads the same ones."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, session: str, fact: Fact) -> None:
        # One INSERT on the backend's fast path, no ORM session (decision records 0016 and
        # 0023); a request is kept once per session, the check in the same statement.
        await self.db.backend.add_fact(_row(session, fact), once=fact.kind is FactKind.REQUEST)

    async def add_finishing(self, session: str, fact: Fact,
                            finishes: Sequence[FinishedCall]) -> None:
        """`add`, with the execution ledger's ``finishes`` in the same write: both are
        kept, or neither."""
        await self.db.backend.add_fact_finishing(
            _row(session, fact), finishes, once=fact.kind is FactKind.REQUEST)

    async def facts(self, session: str) -> list[Fact]:
        # One read on the backend's fast path (decision record 0028).
        return [Fact(FactKind(kind), trusted, source, text, call_id)
                for kind, trusted, source, text, call_id
                in await self.db.backend.session_facts(session)]


def _row(session: str, fact: Fact) -> FactRow:
    return (session, fact.kind.value, fact.trusted, fact.source[:256], fact.call_id,
            fact.text)
