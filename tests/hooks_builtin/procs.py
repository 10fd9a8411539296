"""Worker processes for the cross-process tests: each opens the database by URL, waits for a
common start time, then fires its calls at once and prints what it got as JSON.

    python -m tests.hooks_builtin.procs audit URL N START_AT
    python -m tests.hooks_builtin.procs rate URL N START_AT LIMIT
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from hookgate import Agent, tool
from hookgate.catalog.build import BuildEnv
from hookgate.catalog.builtin.rate_limit import ConnectorRateLimit
from hookgate.hooks.registry import HookRegistry
from hookgate.hooks.services import HookServices
from hookgate.storage.audit import AuditLogStore, AuditRecord
from hookgate.storage.database import Database
from hookgate.storage.types import utcnow
from hookgate.tools import CallIdentity, ToolCall, execute_tool_call
from hookgate.tools.guarded_call import new_call


def record(i: int, org: str | None = "acme", tool_name: str = "oa__purchase_pay",
           **overrides: Any) -> AuditRecord:
    fields: dict[str, Any] = dict(
        created_at=utcnow(), tool_name=tool_name, connector=tool_name.split("__")[0],
        agent_id="buyer", user_id="alice", org_id=org, run_id=f"run-{i}",
        tool_call_id=f"call-{i}", execution_path="react", args_json=json.dumps({"i": i}),
        args_sha256="0" * 64, outcome="ok", blocked_by=None, detail=None, result_chars=4,
        result_sha256="1" * 64, latency_us=i)
    fields.update(overrides)
    return AuditRecord(**fields)


@tool(writes=True)
async def oa__purchase_pay(amount: float) -> str:
    """Pay."""
    return "paid"


async def fire_rate_limited(db: Database, n: int, limit: int, per: str = "user",
                            users: tuple[str, ...] = ("alice",)) -> int:
    """``n`` concurrent calls through the guarded path; how many the limit let through."""
    agent = Agent(id="buyer", name="b", instructions="", tools=[oa__purchase_pay])
    hook = ConnectorRateLimit.from_declaration(
        {"limits": {"oa": f"{limit}/hour"}, "per": per},
        BuildEnv(agent, HookServices(database=db)))
    registry = HookRegistry([hook])
    tools = {"oa__purchase_pay": oa__purchase_pay}

    async def one(i: int) -> bool:
        identity = CallIdentity(agent_id="buyer", user_id=users[i % len(users)],
                                org_id="acme", run_id=f"r{i}")
        call = new_call(identity, ToolCall(f"c{i}", "oa__purchase_pay", {"amount": 1}), tools)
        outcome = await execute_tool_call(call, registry=registry)
        return outcome.allowed

    return sum(await asyncio.gather(*(one(i) for i in range(n))))


async def main(mode: str, url: str, n: int, start_at: float, *rest: str) -> None:
    db = Database(url)
    try:
        if mode == "rate":
            await db.upgrade()  # opens the pool before the start line
        await asyncio.sleep(max(0.0, start_at - time.time()))
        if mode == "audit":
            store = AuditLogStore.shared(db)
            placed = await asyncio.gather(*(store.append(record(i)) for i in range(n)))
            print(json.dumps({"seqs": [p.seq for p in placed]}))
        else:
            allowed = await fire_rate_limited(db, n, int(rest[0]))
            print(json.dumps({"allowed": allowed}))
    finally:
        await db.dispose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]),
                     *sys.argv[5:]))
