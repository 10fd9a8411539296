"""The guarded path's once-only claims hold while the SQLite file's log is checkpointed and
started again beside the calls (decision record 0043): a hostile caller asking each call id
twice at once, once with other arguments, gets one call allowed per id, every report is kept
once, and a gated call runs only with its own approval."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from hookgate.approvals.eligibility import Approver
from hookgate.client import Allowed, AlreadyRan, GuardRefused, Pending
from hookgate.client.local import AsyncLocalGuard
from hookgate.runtime.runtime import Runtime
from hookgate.storage.backends import sqlite_checkpoint
from hookgate.storage.backends.sqlite_driver import SqliteDriver
from tests.client.test_local_guard import payer_deployment


@pytest.fixture
async def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Runtime]:
    # Passes and restarts every few calls instead of every few hundred.
    monkeypatch.setattr(sqlite_checkpoint, "FIRST_PASS_COMMITS", 10)
    monkeypatch.setattr(sqlite_checkpoint, "PAGES_PER_PASS", 40)
    monkeypatch.setattr(sqlite_checkpoint, "RESTART_PAGES", 100)
    rt = Runtime(payer_deployment(tmp_path))
    yield rt
    await rt.stop()


async def test_each_call_runs_once_while_the_log_is_started_again(runtime: Runtime) -> None:
    guard = AsyncLocalGuard(runtime, framework="crewai", user="bot")

    async def ask(i: int, arguments: dict[str, Any]) -> Any:
        try:
            return await guard.before_call(agent="payer", session_id="s", call_id=f"c{i}",
                                           tool="search", arguments=arguments)
        except GuardRefused as refused:
            return refused

    allowed = 0
    for i in range(150):
        same, other = await asyncio.gather(ask(i, {"q": i}), ask(i, {"q": -i - 1}))
        won = [v for v in (same, other) if isinstance(v, Allowed)]
        assert len(won) == 1, (same, other)  # one of the two, never both
        allowed += 1
        report = await guard.report(won[0].call, output=f"r{i}")
        assert report.text == f"r{i}"
        again = await ask(i, dict(won[0].arguments))
        assert isinstance(again, AlreadyRan) and again.observation == f"r{i}", again

    gated = await guard.before_call(agent="payer", session_id="s", call_id="pay",
                                    tool="transfer", arguments={"amount": 5})
    assert isinstance(gated, Pending)
    await runtime.approvals.decide(gated.request_id, "approve", Approver("alice", "acme"))
    runs = await asyncio.gather(*(guard.wait(gated.call, timeout=5) for _ in range(3)))
    assert sum(isinstance(r, Allowed) for r in runs) == 1, runs
    assert all(isinstance(r, Allowed | AlreadyRan) for r in runs), runs

    driver = runtime.db.backend.driver
    assert isinstance(driver, SqliteDriver)
    assert driver.checkpointer.restarts >= 2, vars(driver.checkpointer)
    async with runtime.db.session() as s:
        audited = (await s.execute(text(
            "SELECT count(*), count(DISTINCT tool_call_id) FROM connector_call_logs "
            "WHERE tool_name = 'search' AND outcome = 'ok'"))).one()
    assert tuple(audited) == (allowed, allowed)
