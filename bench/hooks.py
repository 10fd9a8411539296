"""What the built-in hooks cost per tool call, and a command hook against a Python hook.

Every figure times one whole guarded call (`execute_tool_call` with a trivial async tool that
writes, connector ``oa``) and reports p50/p99 in microseconds; ``hook_p50_us`` is the p50
minus that of the same call with no hooks, i.e. what the hooks add. All contenders run
interleaved in one process — round after round, each times a slice of its calls — so the
baseline and every figure share the same machine state (no baseline minutes apart).

  - ``with_database``: audit_log, readonly_guard, connector_rate_limit and result_truncate
    built from their declarations, each alone and the four together (every call appends an
    audit row, reads the org's read-only flag and takes a rate-limit slot), over a SQLite
    file and over PostgreSQL (a fresh database on --postgres-url or
    HOOKGATE_TEST_POSTGRES_URL; skipped without one). Targets for the four: p50 <= 300 us
    on SQLite, <= 1000 us on PostgreSQL.
  - ``decision_logic``: the same hooks with their records kept in memory (the row is still
    built, masked and hashed; the flag and counter are dicts). Target for the four:
    hook_p50 <= 50 us.
  - ``declarative``: a PreToolUse command hook (``/bin/sh -c``, a process per call) against
    a Python hook (``module:function``), each answering "allow".

    python bench/hooks.py [--calls 3000] [--spawn-calls 200] [--rounds 10]
                          [--postgres-url URL] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hookgate import Agent, tool
from hookgate.catalog.build import BuildEnv, build_registry
from hookgate.catalog.builtin.audit_log import AuditLog
from hookgate.catalog.builtin.rate_limit import ConnectorRateLimit, Limit
from hookgate.catalog.builtin.readonly_guard import ReadonlyGuard
from hookgate.catalog.builtin.result_truncate import ResultTruncate
from hookgate.hooks.model import Hook
from hookgate.hooks.registry import HookRegistry
from hookgate.hooks.services import HookServices
from hookgate.storage.audit import GENESIS, AuditRecord, row_hash
from hookgate.storage.database import Database
from hookgate.storage.orgs import sync_orgs
from hookgate.storage.rate_limits import Slot, window_start
from hookgate.tools import CallIdentity, ToolCall, execute_tool_call
from hookgate.tools.guarded_call import new_call

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import pgcluster

TARGET_FOUR_P50_US = {"sqlite": 300, "postgresql": 1000}
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
CALL_NUMBERS = itertools.count()
ARGS = {"amount": 1200, "vendor": "ACME", "api_key": "sk-bench"}


@dataclass
class Contender:
    """One registry under test and the seconds per call it has taken so far."""

    registry: HookRegistry
    per_round: int
    times: list[float] = field(default_factory=list)


async def time_calls(contender: Contender, calls: int, keep: bool = True) -> None:
    """Time ``calls`` guarded calls through the contender's registry."""
    registry, times = contender.registry, contender.times
    for _ in range(calls):
        call = ToolCall(f"c{next(CALL_NUMBERS)}", "oa__purchase_pay", dict(ARGS))
        started = time.perf_counter()
        outcome = await execute_tool_call(new_call(IDENTITY, call, TOOLS), registry=registry)
        elapsed = time.perf_counter() - started
        if not outcome.allowed or outcome.status != "ok":
            raise RuntimeError(f"the benchmark call did not run: {outcome.observation}")
        if keep:
            times.append(elapsed)


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


def declarative_registries() -> dict[str, HookRegistry]:
    declarations = {
        "command_hook": {"command_hooks": [
            {"event": "PreToolUse", "matcher": "oa__purchase_pay",
             "command": "cat > /dev/null"}]},
        "python_hook": {"python_hooks": [
            {"event": "PreToolUse", "matcher": "oa__purchase_pay",
             "function": "__main__:allow"}]},
    }
    out = {}
    for name, hooks in declarations.items():
        agent = Agent(id="buyer", name="b", instructions="", tools=[oa__purchase_pay],
                      model_config_json={"hooks": hooks})
        out[name] = build_registry(agent, HookServices())
    return out


@asynccontextmanager
async def databases(tmp: Path, postgres_url: str | None) -> AsyncIterator[dict[str, Database]]:
    """A migrated SQLite file, and a fresh PostgreSQL database when a server is named."""
    dbs = {"sqlite": Database(f"sqlite+aiosqlite:///{tmp / 'bench.db'}")}
    pg_url = None
    if postgres_url:
        pg_url = await asyncio.to_thread(pgcluster.create_database, postgres_url, "bench_")
        dbs["postgresql"] = Database(pg_url)
    try:
        for db in dbs.values():
            await db.upgrade()
            await sync_orgs(db, [("acme", "ACME", False)])
        yield dbs
    finally:
        for db in dbs.values():
            await db.dispose()
        if postgres_url and pg_url:
            await asyncio.to_thread(pgcluster.drop_database, postgres_url, pg_url)


def sets(hooks: dict[str, Hook]) -> dict[str, HookRegistry]:
    """Each hook alone and the four together (separate instances: no shared state)."""
    return {name: HookRegistry([hooks[name]]) for name in BUILTINS}


async def main(calls: int, spawn_calls: int, rounds: int,
               postgres_url: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="hookgate-bench-") as tmp:
        async with databases(Path(tmp), postgres_url) as dbs:
            contenders: dict[str, Contender] = {
                "no_hooks": Contender(HookRegistry(), calls // rounds)}
            for backend, db in dbs.items():
                for name, registry in sets(database_hooks(db)).items():
                    contenders[f"{backend}/{name}"] = Contender(registry, calls // rounds)
                contenders[f"{backend}/all_four"] = Contender(
                    HookRegistry(list(database_hooks(db).values())), calls // rounds)
            for name, registry in sets(memory_hooks()).items():
                contenders[f"memory/{name}"] = Contender(registry, calls // rounds)
            contenders["memory/all_four"] = Contender(
                HookRegistry(list(memory_hooks().values())), calls // rounds)
            for name, registry in declarative_registries().items():
                n = spawn_calls if name == "command_hook" else spawn_calls * 10
                contenders[f"declarative/{name}"] = Contender(registry, max(1, n // rounds))

            # One untimed slice each first, so no figure pays for first-use costs.
            for c in contenders.values():
                await time_calls(c, max(5, c.per_round // 2), keep=False)
            for _ in range(rounds):
                for c in contenders.values():
                    gc.collect()
                    await time_calls(c, c.per_round)
    base = summary(contenders["no_hooks"].times)["p50_us"]

    def group(prefix: str) -> dict[str, Any]:
        return {name.split("/", 1)[1]: summary(c.times, base)
                for name, c in contenders.items() if name.startswith(prefix + "/")}

    with_db = {backend: group(backend) for backend in dbs}
    decision = group("memory")
    targets: dict[str, Any] = {}
    for backend, figures in with_db.items():
        targets[f"four_with_{backend}_p50_us"] = TARGET_FOUR_P50_US[backend]
        targets[f"four_with_{backend}_met"] = (
            figures["all_four"]["p50_us"] <= TARGET_FOUR_P50_US[backend])
    targets["four_decision_logic_hook_p50_us"] = TARGET_FOUR_DECISION_P50_US
    targets["four_decision_logic_met"] = (
        decision["all_four"]["hook_p50_us"] <= TARGET_FOUR_DECISION_P50_US)
    return {
        "benchmark": "built-in hooks per guarded tool call",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "calls_per_figure": calls,
        "rounds": rounds,
        "no_hooks": summary(contenders["no_hooks"].times),
        "with_database": with_db,
        "decision_logic": decision,
        "declarative": group("declarative"),
        "targets": targets,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--spawn-calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--postgres-url", default=os.environ.get("HOOKGATE_TEST_POSTGRES_URL"))
    parser.add_argument("--quick", action="store_true", help="a few calls (checks the bench works)")
    options = parser.parse_args()
    if options.quick:
        options.calls, options.spawn_calls, options.rounds = 5, 1, 1
    print(json.dumps(asyncio.run(main(options.calls, options.spawn_calls, options.rounds,
                                      options.postgres_url)), indent=2))
