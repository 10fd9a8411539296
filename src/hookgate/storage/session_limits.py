"""The one owner of session-aware limit counts: claims in ``limit_claims``, taken for every
limit a call falls under in one transaction, exact on any number of processes.

A claim is taken when a call is admitted and counts from then (in flight or done) until it
leaves its sliding window or is released. The transaction serialises per limit key; the
database's backend runs it (storage/backends/limit_claims.py: an advisory lock per key on
PostgreSQL, the one write lock on SQLite). Amounts are whole
ten-thousandths (``AMOUNT_SCALE``), so sums are exact on both databases.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from sqlalchemy import text

from hookgate.storage.database import Database
from hookgate.storage.limit_claim_model import (
    AMOUNT_SCALE,
    APPROVED,
    CLAIM,
    DONE,
    MAX_UNITS,
    Claimed,
    Standing,
    Want,
    decide,
)

__all__ = ["AMOUNT_SCALE", "APPROVED", "CLAIM", "DONE", "MAX_UNITS", "Claimed", "LimitClaims",
           "Standing", "Want", "decide"]

_INSERT = ("INSERT INTO limit_claims (limit_key, call_key, kind, amount, at) "
           "VALUES (:k, :c, :kind, :u, :at)")


class LimitClaims:
    """Claims and releases on the database's ``limit_claims`` table."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def claim(self, call_key: str, wants: Sequence[Want], now: float | None = None
                    ) -> Claimed:
        """Claim one call against every limit in ``wants``: all granted, or none taken.
        A call that holds a claim on a key already (asked again after a person decided, or
        checked again with its final arguments) takes no second one there: its claim's
        amount becomes this one (refused if a larger amount no longer fits)."""
        return await self.db.backend.claim_limits(call_key, wants, now)

    async def release(self, call_key: str) -> int:
        """Give back every claim of ``call_key`` in flight (it was refused, rejected or
        failed; one of a call that ran stays); how many there were. Releasing only lowers
        counts, so it needs no lock."""
        async with self.db.transaction() as tx:
            done = await tx.execute(text(
                "DELETE FROM limit_claims WHERE call_key = :c AND kind = 'claim'"),
                {"c": call_key})
        return int(getattr(done, "rowcount", 0) or 0)

    async def settle(self, call_key: str) -> None:
        """``call_key``'s call ran: its claims count until they leave their windows and are
        never given back (a later refusal of the same call id cannot free them)."""
        async with self.db.transaction() as tx:
            await tx.execute(text(
                "UPDATE limit_claims SET kind = 'done' WHERE call_key = :c AND kind = 'claim'"),
                {"c": call_key})

    async def record_approved(self, key: str, call_key: str, now: float | None = None) -> None:
        """Remember that ``key`` (a session and a tool) had an approved call that ran."""
        async with self.db.transaction() as tx:
            await tx.execute(text(
                _INSERT), {"k": key, "c": call_key, "kind": APPROVED, "u": 0,
                                "at": time.time() if now is None else now})

    async def approved(self, key: str, within_s: int | None = None,
                       now: float | None = None) -> bool:
        """Whether ``key`` (a session and a tool) had an approved call that ran (in the
        last ``within_s`` seconds, when given)."""
        query = "SELECT 1 FROM limit_claims WHERE limit_key = :k AND kind = 'approved'"
        params: dict[str, object] = {"k": key}
        if within_s is not None:
            query += " AND at >= :since"
            params["since"] = (time.time() if now is None else now) - within_s
        async with self.db.session() as s:
            found = (await s.execute(text(query + " LIMIT 1"), params)).first()
        return found is not None
