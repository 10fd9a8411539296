"""An audit chain that spans the decision fields: rows written before them (version 2, on a
database migrated only that far) and rows written after (version 3 when they record a
decision, version 2 when not) verify as one chain; a decision edited, forged onto a row that
had none, or stripped from one that had it is named."""

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
#: The revision before audit rows carried the decision on a call.
BEFORE = "0016"
_OLD = ("created_at", "tool_name", "connector", "agent_id", "user_id", "org_id", "run_id",
        "tool_call_id", "execution_path", "args_json", "args_sha256", "outcome", "blocked_by",
        "detail", "result_chars", "result_sha256", "latency_us")


async def spanning_chain(database_url: str) -> tuple[Database, list[dict[str, Any]]]:
    """Two version-2 rows written at revision 0016 (its columns only), then the upgrade,
    then a row alice approved after 19 s, a rule-approved one and an ungated one."""
    db = Database(database_url)
    await db.upgrade(BEFORE)
    prev = GENESIS
    for i in (1, 2):
        rec = record(i, args_json=canonical_json({"payee": f"Zoë {i}"}))
        digest = row_hash(rec, prev, 2)
        values = {k: v for k, v in asdict(rec).items() if k in _OLD}
        await sql(db, f"INSERT INTO connector_call_logs (chain, seq, {', '.join(_OLD)}, "
                      "prev_hash, row_hash, hash_v) VALUES (:chain, :seq, "
                      f"{', '.join(':' + c for c in _OLD)}, :prev_hash, :row_hash, 2)",
                  **values, chain="acme", seq=i, prev_hash=prev, row_hash=digest)
        prev = digest
    await sql(db, "INSERT INTO audit_chain_heads (chain, last_seq, last_hash) "
                  "VALUES ('acme', 2, :h)", h=prev)
    await db.upgrade()
    store = AuditLogStore.shared(db)
    await store.append(record(3, approver="alice", request_id="cr_3", wait_us=19_000_000,
                              latency_us=800))
    await store.append(record(4, approver="rule ar_1 (created by alice)"))
    await store.append(record(5))
    return db, await log_rows(db)


async def test_rows_before_and_after_the_decision_fields_verify_as_one_chain(
        database_url: str) -> None:
    db, rows = await spanning_chain(database_url)
    try:
        assert [(r["seq"], r["hash_v"], r["approver"]) for r in rows] == [
            (1, 2, None), (2, 2, None), (3, 3, "alice"),
            (4, 3, "rule ar_1 (created by alice)"), (5, 2, None)]
        assert (rows[2]["request_id"], rows[2]["wait_us"], rows[2]["latency_us"]) == (
            "cr_3", 19_000_000, 800)
        assert rows[2]["prev_hash"] == rows[1]["row_hash"]
        report = await verify(db)
        assert report.ok, report.problems
        assert report.rows == 5
    finally:
        await db.dispose()


FORGERIES = {
    "another approver": ("UPDATE connector_call_logs SET approver = 'bob' WHERE seq = 3", 3),
    "a shorter wait": ("UPDATE connector_call_logs SET wait_us = 1 WHERE seq = 3", 3),
    "another request": ("UPDATE connector_call_logs SET request_id = 'cr_9' WHERE seq = 3", 3),
    "the decision stripped": ("UPDATE connector_call_logs SET approver = NULL, "
                              "request_id = NULL, wait_us = NULL WHERE seq = 3", 3),
    "stripped and relabelled version 2": (
        "UPDATE connector_call_logs SET approver = NULL, request_id = NULL, wait_us = NULL, "
        "hash_v = 2 WHERE seq = 3", 3),
    "an approver on an old row": (
        "UPDATE connector_call_logs SET approver = 'alice' WHERE seq = 1", 1),
    "an approver on a new ungated row": (
        "UPDATE connector_call_logs SET approver = 'alice', request_id = 'cr_3' "
        "WHERE seq = 5", 5),
    "a look-alike approver": (
        "UPDATE connector_call_logs SET approver = 'alic\u0435' WHERE seq = 3", 3),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
async def test_a_forged_decision_is_named(database_url: str, forgery: str,
                                          attempt: Tally) -> None:
    db, _ = await spanning_chain(database_url)
    try:
        statement, seq = FORGERIES[forgery]
        await sql(db, statement)
        report = await verify(db)
        attempt.record(f"audit decision forgery: {forgery}", got_through=report.ok)
        assert [(p.kind, p.seq) for p in report.problems] == [("edited", seq)]
    finally:
        await db.dispose()


async def test_a_record_that_json_cannot_say_exactly_is_refused_not_guessed(
        database_url: str) -> None:
    db, _ = await spanning_chain(database_url)
    try:
        with pytest.raises(ValueError, match="canonical JSON"):
            await AuditLogStore.shared(db).append(
                record(6, approver="alice\ud800", request_id="cr_6", wait_us=1))
        assert len(await log_rows(db)) == 5 and (await verify(db)).ok
    finally:
        await db.dispose()


def test_version_3_covers_the_decision_and_version_2_rows_keep_their_form() -> None:
    plain = record(1)
    decided = AuditRecord(**{**asdict(plain), "approver": "alice", "request_id": "cr_1",
                             "wait_us": 5})
    assert (plain.hash_v, decided.hash_v) == (2, 3)
    assert row_hash(plain, GENESIS) == row_hash(plain, GENESIS, 2)
    assert row_hash(decided, GENESIS) != row_hash(
        AuditRecord(**{**asdict(decided), "wait_us": 6}), GENESIS)
