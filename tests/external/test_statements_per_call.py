"""What an ungated guarded call (ask + report; audit log and read-only guard declared) sends
to a SQLite file, counted as `bench/throughput.py` counts a server's (every statement on the
driver's connections, BEGIN and COMMIT included; a write alone in autocommit is one
transaction). The ask: the asking person, the call's index entry, whether the session
started and stopped and whether the call started (one read), its start (the session's
record is read at its first ask, then kept: it never changes); the report: the call's index
entry, whether it started and a kept decision (one read), its claim, the audit row (on the
chain's remembered head), the result's fact with the two finishes (one write). None goes
through SQLAlchemy (docs/decisions/0020, 0027, 0031 and 0037).

On PostgreSQL every statement is its own transaction (autocommit on the driver), and the
same writes are made: the result's fact with the two finishes is one statement there too
(decision record 0046: it was three), and the ask's index entry carries the read of
the session's state (decision record 0047)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookgate import Agent, ScriptedLLM
from hookgate.client import Allowed
from hookgate.client.local import AsyncLocalGuard
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec
from hookgate.runtime.runtime import Runtime
from hookgate.storage import database
from hookgate.storage.audit import verify
from hookgate.storage.backends import pg_driver, sqlite_driver
from hookgate.storage.statement_count import StatementCount

#: 16 statements in five transactions (17 before decision 0037: each ask read the session's
#: record again; 20 in six before decision 0031: the ask read whether
#: the session started, whether it stopped and whether the call started one by one, the
#: report its start and its decision, and the result's fact was a write of its own before
#: the two finishes; 29 in six before decision 0027: each one-statement write was a BEGIN
#: IMMEDIATE, the statement and a COMMIT; the audit row's head was read as its seq numbers
#: were reserved, then moved).
#: On PostgreSQL, 8, each in autocommit: the ask's person, index entry with the read of the
#: session's state, and start; the report's index entry, read, claim, the audit row with its
#: chain's head, and the fact with its finishes. (9 before decision 0047, which read the
#: session's state with the index entry; 11 before decision 0046, where the fact and each
#: finish were statements of their own.)
PER_CALL = {"sqlite": (16, 5), "postgresql": (8, 8)}
CALLS = 5


@pytest.mark.perf  # a count of statements: a performance internal
@pytest.mark.both_databases
async def test_an_ungated_guarded_call_sends_few_statements(
        database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    count = StatementCount(str(tmp_path / "count.json"))
    monkeypatch.setattr(count, "start", lambda: None)  # no file to write
    monkeypatch.setattr(database, "COUNT", count)
    monkeypatch.setattr(sqlite_driver, "COUNT", count)
    monkeypatch.setattr(pg_driver, "COUNT", count)
    agent = Agent(id="agent", name="agent", instructions="", tools=[], org_id="acme",
                  owner_user_id="ann", model_config_json={
                      "hooks": {"class_hooks": ["audit_log", "readonly_guard"]},
                      "guarded_calls": {"rules": [{"matcher": "search", "writes": False}]}})
    runtime = Runtime(Deployment(
        database_url=database_url,
        orgs=[OrgSpec("acme", "ACME")], users=[UserSpec("ann", "acme", admin=True)],
        agents={"agent": agent}, model_for=lambda _a: ScriptedLLM([{"answer": "-"}]),
        channels=[]))
    guard = AsyncLocalGuard(runtime, framework="bench")
    try:
        async def call(i: int) -> None:
            verdict = await guard.before_call(agent="agent", session_id="s", call_id=f"c{i}",
                                              tool="search", arguments={"query": f"q{i}"})
            assert isinstance(verdict, Allowed), verdict
            assert (await guard.report(verdict.call, output="3 results")).text == "3 results"

        await call(0)  # the session's first call: its record and SessionStart
        await call(1)  # the chain's head read once, then remembered
        statements, transactions = count.statements, count.transactions
        queries = runtime.db.queries
        for i in range(2, 2 + CALLS):
            await call(i)
        per_call, per_call_transactions = PER_CALL[runtime.db.engine.dialect.name]
        assert (count.statements - statements, count.transactions - transactions) == (
            per_call * CALLS, per_call_transactions * CALLS)
        assert runtime.db.queries == queries  # nothing through SQLAlchemy
        report = await verify(runtime.db)
        assert report.ok, report.problems
        assert report.heads["acme"][0] == 2 + CALLS
    finally:
        await runtime.stop()
