"""The transaction of a claim on session-aware limits, per database: on PostgreSQL an
advisory lock per limit key (taken in key order, so two claims never deadlock) held to the
commit; on SQLite the database's one write lock (the driver's IMMEDIATE transaction). What
is granted is decided by `limit_claim_model.decide`; storage/session_limits.py owns the
claims and asks the backend for this transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hookgate.storage.limit_claim_model import CLAIM, Claimed, Want, decide

_DELETE_OLD = ("DELETE FROM limit_claims WHERE limit_key = ? AND kind <> 'approved' "
               "AND at <= ?")
_STANDING = ("SELECT count(*), coalesce(sum(amount), 0), "
             "coalesce(sum(CASE WHEN call_key = ?1 THEN 1 ELSE 0 END), 0), min(at), "
             "coalesce(sum(CASE WHEN call_key = ?1 THEN amount ELSE 0 END), 0) "
             "FROM limit_claims WHERE limit_key = ?2 AND kind <> 'approved' AND at > ?3")
_INSERT = ("INSERT INTO limit_claims (limit_key, call_key, kind, amount, at) "
           "VALUES (?, ?, ?, ?, ?)")
_UPDATE = ("UPDATE limit_claims SET amount = ? WHERE limit_key = ? AND call_key = ? "
           "AND kind = 'claim'")


_PG_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0))"
_PG_LOCK_CLOCK = ("SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0)), "
                  "extract(epoch from clock_timestamp())::float8")
#: Claims that left the window go, and the window's use is read, in one statement (its
#: SELECT reads the table as before the DELETE, which only removes rows it filters out).
_PG_STANDING = (
    "WITH gone AS (DELETE FROM limit_claims WHERE limit_key = $1::text "
    "AND kind <> 'approved' "
    "AND at <= $3::float8) "
    "SELECT count(*), coalesce(sum(amount), 0), "
    "coalesce(sum(CASE WHEN call_key = $2::text THEN 1 ELSE 0 END), 0), min(at), "
    "coalesce(sum(CASE WHEN call_key = $2::text THEN amount ELSE 0 END), 0) "
    "FROM limit_claims WHERE limit_key = $1::text AND kind <> 'approved' "
    "AND at > $3::float8")
_PG_UPDATE = ("UPDATE limit_claims SET amount = $3::bigint WHERE limit_key = $1::text "
              "AND call_key = $2::text AND kind = 'claim'")
_PG_INSERT = ("INSERT INTO limit_claims (limit_key, call_key, kind, amount, at) "
              "VALUES ($1::text, $2::text, $3::text, $4::bigint, $5::float8)")


def claim_on_sqlite(conn: Any, call_key: str, wants: Sequence[Want], now: float) -> Claimed:
    """The claim inside the driver's IMMEDIATE transaction (the write lock is held: the
    first statement writes)."""
    rows = []
    for want in wants:
        conn.execute(_DELETE_OLD, (want.key, now - want.window_s))
        rows.append(tuple(conn.execute(_STANDING, (call_key, want.key,
                                                   now - want.window_s)).fetchone()))
    claimed, inserts, updates = decide(call_key, wants, rows, now)
    for want in inserts:
        conn.execute(_INSERT, (want.key, call_key, CLAIM, want.units, now))
    for want in updates:
        conn.execute(_UPDATE, (want.units, want.key, call_key))
    return claimed


async def claim_on_postgresql(driver: Any, call_key: str, wants: Sequence[Want],
                              now: float | None) -> Claimed:
    """The claim in one transaction on a raw connection, under one advisory lock per key
    (in key order); ``now`` None: the database's clock, read under the last lock."""
    keys = sorted({w.key for w in wants})
    async with driver.transaction() as conn:
        for key in keys[:-1]:
            await conn.execute(_PG_LOCK, f"hookgate.limit:{key}")
        row = await conn.fetchrow(_PG_LOCK_CLOCK, f"hookgate.limit:{keys[-1]}")
        at = float(row[1]) if now is None else now
        rows = [tuple(await conn.fetchrow(_PG_STANDING, want.key, call_key,
                                          at - want.window_s))
                for want in wants]
        claimed, inserts, updates = decide(call_key, wants, rows, at)
        for want in inserts:
            await conn.execute(_PG_INSERT, want.key, call_key, CLAIM, want.units, at)
        for want in updates:
            await conn.execute(_PG_UPDATE, want.key, call_key, want.units)
    return claimed
