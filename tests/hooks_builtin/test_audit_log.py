"""`audit_log`: a hash-chained row for every tool call — ok, failed and blocked — written
before the model sees anything, and a chain that shows any edited, inserted or deleted row."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert

from hookgate.storage.audit import AuditLogStore, AuditRecord, record_of, row_hash, verify
from hookgate.storage.database import Database
from hookgate.storage.orgs import set_org_read_only
from hookgate.storage.tables import ConnectorCallLog
from hookgate.tools.tool import args_digest
from tests.hooks_builtin.procs import record
from tests.hooks_builtin.world import OA, agent, call, log_rows, run, sql, tool_events, with_orgs
from tests.live_server import free_port

REPO = Path(__file__).resolve().parents[2]
RATE = {"name": "connector_rate_limit", "params": {"limits": {"oa": "3/minute"}}}


async def test_calls_refused_before_any_hook_still_leave_a_row(db: Database) -> None:
    await with_orgs(db, ("acme", False))
    oa = OA()
    buyer = agent(oa, "audit_log")
    await run(
        db, buyer,
        call("OA__purchase_pay", "u1", amount=100, vendor="ACME"),   # not a tool name
        call("oa__purchase_pay", "v1", amount="lots", vendor="ACME"),  # invalid arguments
    )
    rows = await log_rows(db)
    assert [(r["tool_call_id"], r["tool_name"], r["outcome"], r["blocked_by"])
            for r in rows] == [
        ("u1", "OA__purchase_pay", "blocked", "unknown_tool"),
        ("v1", "oa__purchase_pay", "blocked", "argument_validation"),
    ]
    assert "unknown tool" in rows[0]["detail"] and "invalid arguments" in rows[1]["detail"]
    assert oa.payments == []
    assert (await verify(db)).ok


@pytest.mark.both_databases
async def test_every_call_leaves_a_row_ok_failed_and_blocked_by_whom(db: Database) -> None:
    await with_orgs(db, ("acme", False))
    oa = OA()
    buyer = agent(oa, "audit_log", "readonly_guard", RATE)
    result = await run(
        db, buyer,
        call("oa__purchase_pay", "c1", amount=100, vendor="ACME", api_key="sk-live-123"),
        call("crm__lookup", "c2", customer="Globex"),
        call("oa__broken", "c3", note="x"),
        call("oa__purchase_pay", "c4", amount=60_000, vendor="ACME"),  # needs a person
        call("oa__purchase_pay", "c5", amount=200, vendor="ACME"),  # over 3/minute
    )
    await set_org_read_only(db, "acme", True)
    await run(db, buyer, call("oa__purchase_pay", "c6", amount=300, vendor="ACME"))

    rows = await log_rows(db)
    assert [(r["tool_call_id"], r["outcome"], r["blocked_by"]) for r in rows] == [
        ("c1", "ok", None), ("c2", "ok", None), ("c3", "error", None),
        ("c4", "blocked", "approval_gate"), ("c5", "blocked", "connector_rate_limit"),
        ("c6", "blocked", "readonly_guard"),
    ]
    assert [r["seq"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert {r["chain"] for r in rows} == {"acme"}
    first = rows[0]
    assert (first["tool_name"], first["connector"], first["agent_id"], first["user_id"],
            first["org_id"], first["run_id"], first["execution_path"]) == (
        "oa__purchase_pay", "oa", "buyer", "alice", "acme", result.run_id, "react")
    assert "sk-live-123" not in first["args_json"] and '"api_key":"\u2022' in first["args_json"]
    assert first["args_sha256"] == args_digest(
        {"amount": 100.0, "vendor": "ACME", "api_key": "sk-live-123"})
    shown = tool_events(result)[0]["observation"]
    assert first["result_chars"] == len(shown.encode())
    assert first["result_sha256"] == hashlib.sha256(shown.encode()).hexdigest()
    assert all(r["latency_us"] > 0 for r in rows)
    # A failed call's row names the tool and the exception, not what the tool said (it may
    # quote what a PostToolUse hook redacted; the row's result digest covers the output).
    assert rows[2]["detail"] == "Error: tool 'oa__broken' failed (ConnectionError)."
    assert rows[4]["detail"].startswith("Rate limit reached") and "Retry in" in rows[4]["detail"]
    assert rows[5]["detail"] == "Org is in read-only mode — write blocked."
    assert rows[3]["result_chars"] is None and rows[3]["result_sha256"] is None
    assert oa.payments == [{"amount": 100.0, "vendor": "ACME"}]
    assert (await verify(db)).ok


@pytest.mark.both_databases
async def test_a_row_that_cannot_be_written_keeps_the_result_from_the_model(
        db: Database) -> None:
    await with_orgs(db, ("acme", False))
    await sql(db, "DROP TABLE connector_call_logs")
    oa = OA()

    result = await run(db, agent(oa, "audit_log"), call("crm__lookup", customer="Globex"))

    (event,) = tool_events(result)
    assert event["status"] == "withheld" and event["blocked_by"] == "audit_log"
    assert event["observation"].startswith(
        "Tool output withheld: the tool ran, but PostToolUse hook 'audit_log' failed (")
    assert "gold" not in event["observation"]
    assert oa.lookups == 1  # the tool ran; only its output is held back


async def test_a_database_that_is_down_runs_no_tool_and_says_why() -> None:
    # With the database down, the run cannot keep the user's request in the session's facts
    # (which provenance rules read), so it fails closed before the model's first call: the
    # lookup does not run (its result could not be audited) and the payment does not run
    # (the read-only flag cannot be read).
    down = Database(f"postgresql+asyncpg://hookgate@127.0.0.1:{free_port()}/gone")
    oa = OA()
    try:
        result = await run(down, agent(oa, "audit_log", "readonly_guard"),
                           call("crm__lookup", customer="Globex"),
                           call("oa__purchase_pay", amount=5, vendor="ACME"))
    finally:
        await down.dispose()

    assert tool_events(result) == []
    assert (oa.lookups, oa.payments) == (0, [])
    [error] = [e["error"] for e in result.trace if e["type"] == "error"]
    assert error.startswith("FactsUnavailable: the user's request could not be kept in the "
                            "session's facts, so no tool may run"), error
    assert "Connection refused" in error or "connect" in error.lower(), error


@pytest.mark.both_databases
async def test_concurrent_appends_in_one_process_never_fork_a_chain(db: Database) -> None:
    store = AuditLogStore.shared(db)

    placed = await asyncio.gather(*(store.append(record(i, org=("acme", "globex")[i % 2]))
                                    for i in range(120)))

    for org in ("acme", "globex"):
        assert sorted(p.seq for p in placed if p.chain == org) == list(range(1, 61))
    report = await verify(db)
    assert report.ok and report.rows == 120
    assert report.heads["acme"][0] == 60


@pytest.mark.both_databases
async def test_appends_from_two_processes_never_fork_the_chain(db: Database,
                                                               database_url: str) -> None:
    start_at = time.time() + 2.0
    workers = [await worker("audit", database_url, "60", str(start_at)) for _ in range(2)]
    await asyncio.sleep(max(0.0, start_at - time.time()))
    store = AuditLogStore.shared(db)
    mine = await asyncio.gather(*(store.append(record(i)) for i in range(60)))
    outputs = [await asyncio.wait_for(w.communicate(), 90) for w in workers]
    assert all(w.returncode == 0 for w in workers), outputs

    rows = await log_rows(db)
    assert [r["seq"] for r in rows] == list(range(1, 181))
    assert len(mine) == 60
    assert (await verify(db)).ok


# -- tampering -----------------------------------------------------------------------------


async def six_rows(db: Database) -> list[dict[str, Any]]:
    store = AuditLogStore.shared(db)
    for i in range(1, 7):
        await store.append(record(i, tool_name="oa__purchase_pay" if i % 2 else "crm__lookup"))
    return await log_rows(db)


async def problems(db: Database) -> list[tuple[str, int | None, int | None]]:
    report = await verify(db)
    return [(p.kind, p.row_id, p.seq) for p in report.problems]


@pytest.mark.both_databases
async def test_an_edited_row_is_named(db: Database) -> None:
    rows = await six_rows(db)
    await sql(db, "UPDATE connector_call_logs SET args_json = :forged WHERE seq = 3",
              forged='{"i":999}')

    assert await problems(db) == [("edited", rows[2]["id"], 3)]


@pytest.mark.both_databases
async def test_an_edited_row_whose_hash_was_recomputed_is_named(db: Database) -> None:
    rows = await six_rows(db)
    forged = {**rows[2], "user_id": "mallory"}
    await sql(db, "UPDATE connector_call_logs SET user_id = 'mallory', row_hash = :h "
                  "WHERE seq = 3", h=row_hash(record_of(forged), forged["prev_hash"]))

    assert await problems(db) == [("edited", rows[2]["id"], 3)]


@pytest.mark.both_databases
async def test_a_row_inserted_between_two_others_is_named(db: Database) -> None:
    rows = await six_rows(db)
    # Make room after seq 2 and slip a well-formed row in, linked to the row before it.
    await sql(db, "UPDATE connector_call_logs SET seq = seq * 10")
    fake = record(99, detail="never happened")
    await insert_row(db, fake, seq=25, prev=rows[1]["row_hash"])

    found = await problems(db)
    assert len(found) == 1
    kind, row_id, seq = found[0]
    assert (kind, seq) == ("inserted", 25) and row_id not in {r["id"] for r in rows}


@pytest.mark.both_databases
async def test_a_row_appended_behind_the_logs_back_is_named(db: Database) -> None:
    rows = await six_rows(db)
    await insert_row(db, record(99), seq=7, prev=rows[-1]["row_hash"])

    assert [(k, s) for k, _, s in await problems(db)] == [("inserted", 7)]


@pytest.mark.both_databases
async def test_a_deleted_row_is_named(db: Database) -> None:
    await six_rows(db)
    await sql(db, "DELETE FROM connector_call_logs WHERE seq = 3")

    assert [(k, s) for k, _, s in await problems(db)] == [("deleted", 4)]
    (problem,) = (await verify(db)).problems
    assert "seq 3 were deleted" in problem.message


@pytest.mark.both_databases
async def test_deleting_the_last_rows_is_caught_by_the_chain_head(db: Database) -> None:
    await six_rows(db)
    await sql(db, "DELETE FROM connector_call_logs WHERE seq >= 5")

    (problem,) = (await verify(db)).problems
    assert problem.kind == "deleted" and "seq 5 to 6" in problem.message


@pytest.mark.both_databases
def test_hookgate_audit_verify_names_the_tampered_row_and_exits_1(database_url: str) -> None:
    async def setup() -> int:
        db = Database(database_url)
        await db.upgrade()
        rows = await six_rows(db)
        await db.dispose()
        return int(rows[3]["id"])

    row_id = asyncio.run(setup())
    ok = hookgate("audit", "verify", "--database", database_url)
    assert ok.returncode == 0, ok.stderr
    assert "ok: 6 row(s) in 1 chain(s) verified" in ok.stdout
    assert "chain 'acme': head at seq 6, sha256" in ok.stdout

    async def tamper() -> None:
        db = Database(database_url)
        await sql(db, "UPDATE connector_call_logs SET outcome = 'ok', detail = NULL "
                      "WHERE seq = 4")
        await sql(db, "UPDATE connector_call_logs SET latency_us = 1 WHERE seq = 4")
        await db.dispose()

    asyncio.run(tamper())
    bad = hookgate("audit", "verify", "--database", database_url)
    assert bad.returncode == 1
    assert f"row {row_id} (seq 4, crm__lookup) was edited" in bad.stderr
    assert "tampered with: 1 problem(s) in 6 row(s)" in bad.stderr


async def worker(*args: str) -> asyncio.subprocess.Process:
    """A real second process (tests/hooks_builtin/procs.py) on the same database."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.hooks_builtin.procs", *args, cwd=REPO,
        # The repository root (for ``tests.``) ahead of whatever finds hookgate itself.
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


def hookgate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})


async def insert_row(db: Database, fake: AuditRecord, *, seq: int, prev: str) -> None:
    """A row put in with SQL, well-formed and correctly hashed, as a forger would."""
    values = {**asdict(fake), "chain": fake.chain, "seq": seq, "prev_hash": prev,
              "row_hash": row_hash(fake, prev)}
    async with db.engine.begin() as conn:
        await conn.execute(insert(ConnectorCallLog), values)
