"""An audit chain that spans the delegation fields: rows written before them (versions 2 and
3, on a database migrated only that far) and a sub-agent's rows written after (version 4,
which hashes its parent session and depth) verify as one chain; a depth or parent edited,
stripped, or forged onto a row that had none is named."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest

from hookgate.canonical import canonical_json
from hookgate.storage.audit import GENESIS, AuditLogStore, AuditRecord, row_hash, verify
from hookgate.storage.database import Database
from tests.adversarial_tally import Tally
from tests.hooks_builtin.procs import record
from tests.hooks_builtin.world import log_rows, sql

#: The rows before the upgrade need a database migrated only that far: an empty one.
pytestmark = [pytest.mark.both_databases, pytest.mark.empty_database]
#: The revision before audit rows carried a sub-agent's place in its delegation tree.
BEFORE = "0017"
_OLD = ("created_at", "tool_name", "connector", "agent_id", "user_id", "org_id", "run_id",
        "tool_call_id", "execution_path", "args_json", "args_sha256", "outcome", "blocked_by",
        "detail", "result_chars", "result_sha256", "latency_us", "approver", "request_id",
        "wait_us")


async def spanning_chain(database_url: str) -> Database:
    """A version-2 and a version-3 row written at revision 0017 (its columns only), then the
    upgrade, then a sub-agent's call alice approved (depth 1), a sub-sub-agent's ungated
    call (depth 2) and a top-level call."""
    db = Database(database_url)
    await db.upgrade(BEFORE)
    prev = GENESIS
    for i, decided in ((1, {}), (2, {"approver": "alice", "request_id": "cr_2",
                                     "wait_us": 7})):
        rec = record(i, args_json=canonical_json({"payee": f"Zoë {i}"}), **decided)
        digest = row_hash(rec, prev)
        values = {k: v for k, v in asdict(rec).items() if k in _OLD}
        await sql(db, f"INSERT INTO connector_call_logs (chain, seq, {', '.join(_OLD)}, "
                      "prev_hash, row_hash, hash_v) VALUES (:chain, :seq, "
                      f"{', '.join(':' + c for c in _OLD)}, :prev_hash, :row_hash, :v)",
                  **values, chain="acme", seq=i, prev_hash=prev, row_hash=digest,
                  v=rec.hash_v)
        prev = digest
    await sql(db, "INSERT INTO audit_chain_heads (chain, last_seq, last_hash) "
                  "VALUES ('acme', 2, :h)", h=prev)
    await db.upgrade()
    store = AuditLogStore.shared(db)
    await store.append(record(3, approver="alice", request_id="cr_3", wait_us=9,
                              execution_path="external", parent_session="s-boss", depth=1))
    await store.append(record(4, execution_path="delegate", parent_session="run-3", depth=2))
    await store.append(record(5))
    return db


FORGERIES = {
    "a shallower depth": ("UPDATE connector_call_logs SET depth = 0 WHERE seq = 4", 4),
    "a deeper depth": ("UPDATE connector_call_logs SET depth = 3 WHERE seq = 3", 3),
    "another parent": (
        "UPDATE connector_call_logs SET parent_session = 's-other' WHERE seq = 3", 3),
    "the delegation stripped": (
        "UPDATE connector_call_logs SET parent_session = NULL, depth = NULL WHERE seq = 4", 4),
    "stripped and relabelled version 3": (
        "UPDATE connector_call_logs SET parent_session = NULL, depth = NULL, hash_v = 3 "
        "WHERE seq = 3", 3),
    "a depth on a version 3 row": (
        "UPDATE connector_call_logs SET depth = 1 WHERE seq = 2", 2),
    "a parent on a new top-level row": (
        "UPDATE connector_call_logs SET parent_session = 's-boss', depth = 1 WHERE seq = 5",
        5),
}


async def test_a_sub_agents_rows_verify_with_older_ones_and_every_forgery_is_named(
        database_url: str, attempt: Tally) -> None:
    db = await spanning_chain(database_url)
    try:
        rows = await log_rows(db)
        assert [(r["seq"], r["hash_v"], r["parent_session"], r["depth"]) for r in rows] == [
            (1, 2, None, None), (2, 3, None, None), (3, 4, "s-boss", 1), (4, 4, "run-3", 2),
            (5, 2, None, None)]
        assert rows[2]["prev_hash"] == rows[1]["row_hash"] and rows[2]["approver"] == "alice"
        report = await verify(db)
        assert report.ok and report.rows == 5, report.problems
        for forgery, (statement, seq) in FORGERIES.items():
            before = rows[seq - 1]
            await sql(db, statement)
            report = await verify(db)
            attempt.record(f"audit delegation forgery: {forgery}", got_through=report.ok)
            assert [(p.kind, p.seq) for p in report.problems] == [("edited", seq)], forgery
            await sql(db, "UPDATE connector_call_logs SET parent_session = :p, depth = :d, "
                          "hash_v = :v WHERE seq = :seq", p=before["parent_session"],
                      d=before["depth"], v=before["hash_v"], seq=seq)
        assert (await verify(db)).ok  # each forgery undone: the chain is whole again
    finally:
        await db.dispose()


def test_version_4_covers_the_delegation_and_older_rows_keep_their_form() -> None:
    plain, decided = record(1), record(2, approver="alice", request_id="cr_2", wait_us=5)
    deep: dict[str, Any] = {**asdict(decided), "parent_session": "s-boss", "depth": 1}
    sub = AuditRecord(**deep)
    assert (plain.hash_v, decided.hash_v, sub.hash_v) == (2, 3, 4)
    assert row_hash(plain, GENESIS) == row_hash(plain, GENESIS, 2)
    assert row_hash(decided, GENESIS) == row_hash(decided, GENESIS, 3)
    for changed in ({"depth": 2}, {"parent_session": "s-other"}, {"approver": "bob"}):
        assert row_hash(sub, GENESIS) != row_hash(AuditRecord(**{**deep, **changed}), GENESIS)
