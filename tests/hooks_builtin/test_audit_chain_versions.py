"""An audit chain that spans the upgrade to RFC 8785: rows written before it (version 1,
written here exactly as the earlier code wrote them, on a database migrated only that far)
and rows written after it verify together, and tampering with either kind is named."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from typing import Any

import pytest

from hookgate.canonical import canonical_json
from hookgate.storage.audit import GENESIS, AuditLogStore, AuditRecord, verify
from hookgate.storage.database import Database
from tests.hooks_builtin.procs import record
from tests.hooks_builtin.world import log_rows, sql

#: The rows before the upgrade need a database migrated only that far: an empty one.
pytestmark = [pytest.mark.both_databases, pytest.mark.empty_database]
#: The revision before audit rows carried their hash version.
BEFORE = "0014"


def old_row_hash(rec: AuditRecord, prev: str) -> str:
    """How hookgate hashed a row before RFC 8785 (a copy of that code, on purpose; the
    record then had no decision fields, added with version 3, nor delegation fields, added
    with version 4, nor the session, added with version 5, nor the acting service, added
    with version 6)."""
    content: dict[str, Any] = {k: v for k, v in asdict(rec).items()
                               if k not in ("approver", "request_id", "wait_us",
                                            "parent_session", "depth", "session_id",
                                            "acting_service")}
    content["created_at"] = rec.created_at.isoformat(timespec="microseconds")
    content["chain"], content["prev_hash"] = rec.chain, prev
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      default=str)
    return hashlib.sha256(b"hookgate-audit-v1\n" + text.encode("utf-8")).hexdigest()


async def old_rows(database_url: str, n: int) -> Database:
    """A database at the revision before the upgrade with ``n`` rows of chain 'acme' written
    the old way (non-ASCII arguments included, which the old form escaped), then upgraded."""
    db = Database(database_url)
    await db.upgrade(BEFORE)
    prev = GENESIS
    for i in range(1, n + 1):
        rec = record(i, args_json=json.dumps({"payee": f"Zoë {i}"}, ensure_ascii=True),
                     detail="café")
        digest = old_row_hash(rec, prev)
        await sql(db, "INSERT INTO connector_call_logs (chain, seq, created_at, tool_name, "
                      "connector, agent_id, user_id, org_id, run_id, tool_call_id, "
                      "execution_path, args_json, args_sha256, outcome, blocked_by, detail, "
                      "result_chars, result_sha256, latency_us, prev_hash, row_hash) VALUES "
                      "(:chain, :seq, :created_at, :tool_name, :connector, :agent_id, "
                      ":user_id, :org_id, :run_id, :tool_call_id, :execution_path, :args_json, "
                      ":args_sha256, :outcome, :blocked_by, :detail, :result_chars, "
                      ":result_sha256, :latency_us, :prev_hash, :row_hash)",
                  **asdict(rec), chain="acme", seq=i, prev_hash=prev, row_hash=digest)
        prev = digest
    await sql(db, "INSERT INTO audit_chain_heads (chain, last_seq, last_hash) "
                  "VALUES ('acme', :n, :h)", n=n, h=prev)
    await db.upgrade()
    return db


async def spanning_chain(database_url: str) -> tuple[Database, list[dict[str, Any]]]:
    db = await old_rows(database_url, 3)
    store = AuditLogStore.shared(db)
    for i in range(4, 7):
        await store.append(record(i, args_json=canonical_json({"payee": f"Zoë {i}"}),
                                  detail="café"))
    return db, await log_rows(db)


async def test_rows_written_before_the_upgrade_and_after_it_verify_as_one_chain(
        database_url: str) -> None:
    db, rows = await spanning_chain(database_url)
    try:
        assert [(r["seq"], r["hash_v"]) for r in rows] == [
            (1, 1), (2, 1), (3, 1), (4, 2), (5, 2), (6, 2)]
        assert rows[3]["prev_hash"] == rows[2]["row_hash"]  # the new rows link onto the old
        assert "\\u00eb" in rows[0]["args_json"] and "Zoë" in rows[3]["args_json"]
        report = await verify(db)
        assert report.ok, report.problems
        assert report.rows == 6
    finally:
        await db.dispose()


async def test_a_tampered_row_from_before_the_upgrade_is_named(database_url: str) -> None:
    db, _ = await spanning_chain(database_url)
    try:
        await sql(db, "UPDATE connector_call_logs SET detail = 'nothing' WHERE seq = 2")
        report = await verify(db)
        assert [(p.kind, p.seq) for p in report.problems] == [("edited", 2)]
    finally:
        await db.dispose()


async def test_a_tampered_row_from_after_the_upgrade_is_named(database_url: str) -> None:
    db, _ = await spanning_chain(database_url)
    try:
        await sql(db, "UPDATE connector_call_logs SET args_json = :a WHERE seq = 5",
                  a=canonical_json({"payee": "Mallory"}))
        report = await verify(db)
        assert [(p.kind, p.seq) for p in report.problems] == [("edited", 5)]
    finally:
        await db.dispose()


@pytest.mark.parametrize("forged_version", [1, 3, 5])
async def test_a_row_whose_hash_version_was_changed_is_named(
        database_url: str, forged_version: int) -> None:
    db, _ = await spanning_chain(database_url)
    try:
        await sql(db, "UPDATE connector_call_logs SET hash_v = :v WHERE seq = 4",
                  v=forged_version)
        report = await verify(db)
        assert [(p.kind, p.seq) for p in report.problems] == [("edited", 4)]
    finally:
        await db.dispose()
