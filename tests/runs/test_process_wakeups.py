"""A process that only waits for decisions (``hookgate mcp stdio`` starts its runtime this
way) is woken by a decision another process made, at once, on PostgreSQL: through the
notifications its runtime subscribes to, not the approvals' periodic sweep."""

from __future__ import annotations

import asyncio
import hashlib
import time

import pytest

from hookgate.approvals.eligibility import Approver
from hookgate.approvals.service import ApprovalAsk
from hookgate.runtime.runtime import Runtime
from tests.channels.world import world

#: Far longer than the test waits: only a notification can wake the call in time.
SWEEP_S = 120.0


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_a_decision_in_another_process_wakes_a_waiting_call_at_once(
        database_url: str) -> None:
    deployment, _ = world(database_url, [])
    waiting = Runtime(deployment, sweep_interval=SWEEP_S)  # as `hookgate mcp stdio` runs
    decider = Runtime(deployment)  # the server whose inbox decides
    await waiting.db.upgrade()
    await waiting.sync()
    await waiting.start_wakeups()
    await waiting.approvals.start()
    try:
        args = {"amount": 90_000, "vendor": "ACME", "api_token": "t"}
        ask = ApprovalAsk(
            agent=deployment.agents["buyer"], run_id="stdio-session", tool_call_id="c1",
            tool_name="wire_transfer", args=args,
            args_sha256=hashlib.sha256(repr(args).encode()).hexdigest(), user_id="alice",
            org_id="acme")
        call = asyncio.create_task(waiting.approvals.request_and_wait(ask))
        request = None
        for _ in range(100):
            request = await decider.approvals.store.for_call("stdio-session", "c1")
            if request is not None:
                break
            await asyncio.sleep(0.05)
        assert request is not None and request.pending
        await asyncio.sleep(0.2)  # the call is waiting on its future now
        started = time.monotonic()
        await decider.approvals.decide(request.id, "approve", Approver("alice", "acme"))
        decision = await asyncio.wait_for(call, 10)
        assert decision.status == "approved" and decision.request_id == request.id
        assert time.monotonic() - started < 5
    finally:
        await waiting.stop_wakeups()
        await waiting.approvals.stop()
        await waiting.db.dispose()
        await decider.db.dispose()
