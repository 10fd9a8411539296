"""What the built-in hooks cost per tool call, and a command hook against a Python hook.

Every figure times one whole guarded call (`execute_tool_call` with a trivial async tool that
writes, connector ``oa``) and reports p50/p99 in microseconds; ``hook_p50_us`` is the p50
minus that of the same call with no hooks, i.e. what the hooks add.

  - ``with_database``: audit_log, readonly_guard, connector_rate_limit and result_truncate
    built from their declarations over a SQLite file, each alone and the four together
    (every call appends an audit row, reads the org's read-only flag and takes a
    rate-limit slot). Target for the four: p50 <= 1000 us.
  - ``decision_logic``: the same hooks with their records kept in memory (the row is still
    built, masked and hashed; the flag and counter are dicts). Target for the four:
    hook_p50 <= 50 us.
  - ``declarative``: a PreToolUse command hook (``/bin/sh -c``, a process per call) against
    a Python hook (``module:function``), each answering "allow".

    python bench/hooks.py [--calls 3000] [--spawn-calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from hookgate import Agent, tool
from hookgate.catalog.build import BuildEnv, build_registry
from hookgate.catalog.builtin.audit_log import AuditLog
from hookgate.catalog.builtin.rate_limit import ConnectorRateLimit, Limit
from hookgate.catalog.builtin.readonly_guard import ReadonlyGuard
from hookgate.catalog.builtin.result_truncate import ResultTruncate
from hookgate.catalog.services import HookServices
from hookgate.hooks.model import Hook
from hookgate.hooks.registry import HookRegistry
from hookgate.storage.audit import GENESIS, AuditRecord, row_hash
from hookgate.storage.database import Database
from hookgate.storage.orgs import add_missing_orgs
from hookgate.storage.rate_limits import Slot, window_start
from hookgate.tools import CallIdentity, ToolCall, execute_tool_call

TARGET_FOUR_WITH_DB_P50_US = 1000
TARGET_FOUR_DECISION_P50_US = 50
BUILTINS = ("audit_log", "readonly_guard", "connector_rate_limit", "result_truncate")
UNLIMITED = {"limits": {"oa": "1000000000/day"}}


@tool(writes=True)
async def oa__purchase_pay(amount: float, vendor: str, api_key: str = "") -> str:
    """Pay a vendor (does nothing: the benchmark times what is around it)."""
    return f"paid {amount:.0f} to {vendor}"


def allow(event: dict[str, Any]) -> None:
    """The Python hook: Claude Code's "allow" is no answer at all."""
    return None


AGENT = Agent(id="buyer", name="Purchasing agent", instructions="", tools=[oa__purchase_pay],
              org_id="acme", owner_user_id="alice")
TOOLS = {"oa__purchase_pay": oa__purchase_pay}
IDENTITY = CallIdentity(agent_id="buyer", user_id="alice", org_id="acme", run_id="bench")
ARGS = {"amount": 1200, "vendor": "ACME", "api_key": "sk-bench"}


async def time_calls(registry: HookRegistry, calls: int, warmup: int) -> list[float]:
    """Seconds per guarded call, after ``warmup`` untimed ones."""
    times: list[float] = []
    gc.collect()
    for i in range(warmup + calls):
        call = ToolCall(f"c{i}", "oa__purchase_pay", dict(ARGS))
        started = time.perf_counter()
        outcome = await execute_tool_call(call, tools=TOOLS, registry=registry,
                                          identity=IDENTITY)
        elapsed = time.perf_counter() - started
        if not outcome.allowed or outcome.status != "ok":
            raise RuntimeError(f"the benchmark call did not run: {outcome.observation}")
        if i >= warmup:
            times.append(elapsed)
    return times


def summary(times: list[float], baseline_p50: float | None = None) -> dict[str, float]:
    ordered = sorted(times)
    p50 = statistics.median(ordered) * 1e6
    out = {"p50_us": round(p50, 1),
           "p99_us": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e6, 1)}
    if baseline_p50 is not None:
        out["hook_p50_us"] = round(p50 - baseline_p50, 1)
    return out


# -- the hooks with their records in memory (the decision logic alone) -----------------------


class _MemoryCounter:
    def __init__(self) -> None:
        self.counts: dict[tuple[str, int], int] = {}

    async def take(self, key: str, limit: int, window_s: int, now: float) -> Slot:
        slot = (key, window_start(now, window_s))
        count = self.counts.get(slot, 0)
        if count >= limit:
            return Slot(False, 1.0)
        self.counts[slot] = count + 1
        return Slot(True)


def memory_hooks() -> dict[str, Hook]:
    last = [GENESIS]

    async def keep(record: AuditRecord) -> None:
        last[0] = row_hash(record, last[0])  # what the store computes for the chain

    async def writable(org_id: str) -> bool:
        return False

    return {
        "audit_log": AuditLog(keep),
        "readonly_guard": ReadonlyGuard(writable),
        "connector_rate_limit": ConnectorRateLimit(
            {"oa": Limit(1_000_000_000, 86400, "1000000000/day")}, _MemoryCounter()),
        "result_truncate": ResultTruncate(),
    }


def database_hooks(db: Database) -> dict[str, Hook]:
    env = BuildEnv(AGENT, HookServices(database=db))
    return {
        "audit_log": AuditLog.from_declaration({}, env),
        "readonly_guard": ReadonlyGuard.from_declaration({}, env),
        "connector_rate_limit": ConnectorRateLimit.from_declaration(dict(UNLIMITED), env),
        "result_truncate": ResultTruncate.from_declaration({}, env),
    }


async def measure_set(make: Callable[[], Awaitable[dict[str, Hook]]], calls: int,
                      warmup: int, baseline_p50: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in (*BUILTINS, "all_four"):
        hooks = await make()
        chosen = list(hooks.values()) if name == "all_four" else [hooks[name]]
        out[name] = summary(await time_calls(HookRegistry(chosen), calls, warmup),
                            baseline_p50)
    return out


async def declarative(spawn_calls: int, warmup: int, baseline_p50: float) -> dict[str, Any]:
    declarations = {
        "command_hook": {"command_hooks": [
            {"event": "PreToolUse", "matcher": "oa__purchase_pay",
             "command": "cat > /dev/null"}]},
        "python_hook": {"python_hooks": [
            {"event": "PreToolUse", "matcher": "oa__purchase_pay",
             "function": "__main__:allow"}]},
    }
    out: dict[str, Any] = {}
    for name, hooks in declarations.items():
        agent = Agent(id="buyer", name="b", instructions="", tools=[oa__purchase_pay],
                      model_config_json={"hooks": hooks})
        registry = build_registry(agent, HookServices())
        calls = spawn_calls if name == "command_hook" else spawn_calls * 10
        out[name] = summary(await time_calls(registry, calls, warmup), baseline_p50)
    return out


async def main(calls: int, spawn_calls: int) -> dict[str, Any]:
    warmup = max(50, calls // 10)
    # One untimed pass through every hook first, so no figure pays for first-use costs.
    await time_calls(HookRegistry(list(memory_hooks().values())), warmup, warmup)
    baseline = summary(await time_calls(HookRegistry(), calls, warmup))
    base = baseline["p50_us"]

    async def in_memory() -> dict[str, Hook]:
        return memory_hooks()

    with tempfile.TemporaryDirectory(prefix="hookgate-bench-") as tmp:
        db = Database(f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}")
        await db.upgrade()
        await add_missing_orgs(db, [("acme", "ACME", False)])

        async def on_sqlite() -> dict[str, Hook]:
            return database_hooks(db)

        try:
            with_db = await measure_set(on_sqlite, calls, warmup, base)
        finally:
            await db.dispose()
    decision = await measure_set(in_memory, calls, warmup, base)
    spawned = await declarative(spawn_calls, max(5, spawn_calls // 10), base)
    return {
        "benchmark": "built-in hooks per guarded tool call",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "calls_per_figure": calls,
        "no_hooks": baseline,
        "with_database": {"database": "SQLite file (WAL)", **with_db},
        "decision_logic": decision,
        "declarative": spawned,
        "targets": {
            "four_with_database_p50_us": TARGET_FOUR_WITH_DB_P50_US,
            "four_with_database_met": with_db["all_four"]["p50_us"]
            <= TARGET_FOUR_WITH_DB_P50_US,
            "four_decision_logic_hook_p50_us": TARGET_FOUR_DECISION_P50_US,
            "four_decision_logic_met": decision["all_four"]["hook_p50_us"]
            <= TARGET_FOUR_DECISION_P50_US,
        },
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--spawn-calls", type=int, default=200)
    options = parser.parse_args()
    print(json.dumps(asyncio.run(main(options.calls, options.spawn_calls)), indent=2))
