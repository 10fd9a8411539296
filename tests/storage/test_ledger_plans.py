"""On PostgreSQL a ledger statement's plan stays a lookup of its records by their whole key,
however it was planned. The driver's connections use generic plans (decision record 0011),
and PostgreSQL keeps a generic plan from its first execution until the table's statistics
change. A plan made while the ledger was small must not read the whole run, or the whole
table, once the ledger has grown: before decision record 0047 the read of a call's records
scanned every record of the session's run (a long session's calls grew slower with each
call before them), and the finishes' ``UPDATE … FROM unnest(…)`` hashed a scan of the
whole table; and the check that a session's request is kept once read every fact of the
session."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import pytest

from hookgate.storage.backends.postgresql import (
    _claim_reading,
    _fact_finishing,
    _finishes_by_key,
    _s,
)

#: Records of one run in the grown ledger: one session's calls, two records each.
RECORDS = 4000
#: Most buffers a lookup of up to three records by their whole key reads (about 3 per
#: record: the index's levels and the row); a scan of the run reads hundreds.
MOST_BUFFERS = 40

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for child in plan.get("Plans", ()) for n in _nodes(child))]


async def _explained(conn: asyncpg.Connection, statement: str, args: str) -> dict[str, Any]:
    """The plan the prepared ``statement`` runs with ``args``, executed in a transaction
    that is rolled back."""
    transaction = conn.transaction()
    await transaction.start()
    try:
        row = await conn.fetchval(
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE {statement}({args})")
    finally:
        await transaction.rollback()  # the ledger stays as it was filled
    plan: dict[str, Any] = json.loads(row)[0]["Plan"]
    return plan


async def test_a_ledger_lookup_planned_on_an_empty_ledger_reads_only_its_records(
        database_url: str) -> None:
    conn = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"),
                                 server_settings={"plan_cache_mode": "force_generic_plan"})
    try:
        insert = _s("fact_insert").sql
        statements = {
            "among": _s("prior_among").sql,
            "fact_finishing": _fact_finishing(insert, 2),
            "finish": _finishes_by_key(2, 1, "$1::timestamptz")[0],
            "claim_reading": _claim_reading(_s("claim_finished").sql, _s("prior_among").sql),
        }
        args = {
            "among": "'r', 'c1', 'c2', 'c3'",
            "fact_finishing": "'s', 'result', false, 'search', 'c1', '3 results', now(), "
                              "now(), 'x', true, 'r', 'c1', 'x', true, 'r', 'c2'",
            "finish": "now(), 'x', true, 'r', 'c3'",
            "claim_reading": "'index', 'k', 'search', 'x', now(), now(), 'o', true, "
                             "'r', 'c1', 'c2', 'c3'",
        }
        for name, sql in statements.items():
            await conn.execute(f"PREPARE {name} AS {sql}")
            await _explained(conn, name, args[name])  # planned now, on the empty ledger
        await conn.execute(
            "INSERT INTO tool_executions (run_id, tool_call_id, tool_name, args_sha256, "
            "started_at) SELECT 'r', 'c' || g, 'search', 'x', now() "
            "FROM generate_series(1, $1) AS g", RECORDS)
        for name in statements:
            plan = await _explained(conn, name, args[name])
            nodes = _nodes(plan)
            on_ledger = [n for n in nodes if n.get("Relation Name") == "tool_executions"]
            assert on_ledger, plan
            for node in on_ledger:
                assert node["Node Type"] in ("Index Scan", "ModifyTable"), (name, node)
                assert "Filter" not in node, (name, node)  # the whole key is the index's
            read = sum(n.get("Shared Hit Blocks", 0) + n.get("Shared Read Blocks", 0)
                       for n in nodes if n.get("Relation Name") == "tool_executions"
                       or n.get("Index Name") == "tool_executions_pkey")
            assert read <= MOST_BUFFERS, (name, read, plan)
    finally:
        await conn.close()


async def test_the_check_that_a_request_is_kept_once_reads_only_the_sessions_requests(
        database_url: str) -> None:
    # A session's facts are mostly its results; the check reads its requests alone, through
    # their own index, however the statement was planned (decision record 0047).
    conn = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"),
                                 server_settings={"plan_cache_mode": "force_generic_plan"})
    try:
        await conn.execute(f"PREPARE once AS {_s('fact_insert_once').sql}")
        args = "'s', 'request', true, 'user', NULL, 'book the flight', now()"
        await _explained(conn, "once", args)  # planned now, on an empty table
        await conn.execute(
            "INSERT INTO session_facts (session, kind, trusted, source, call_id, text, "
            "created_at) SELECT 's', CASE WHEN g % 1000 = 0 THEN 'request' ELSE 'result' END, "
            "false, 'search', 'c' || g, repeat('a page of results ', 20) || g, now() "
            "FROM generate_series(1, $1) AS g", RECORDS)
        plan = await _explained(conn, "once", args)
        nodes = _nodes(plan)
        on_facts = [n for n in nodes if n.get("Relation Name") == "session_facts"
                    and n["Node Type"] != "ModifyTable"]
        assert [n.get("Index Name") for n in on_facts] == ["ix_session_facts_requests"], plan
        read = sum(n.get("Shared Hit Blocks", 0) + n.get("Shared Read Blocks", 0)
                   for n in on_facts)
        assert read <= MOST_BUFFERS, (read, plan)
    finally:
        await conn.close()
