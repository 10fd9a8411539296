"""Benchmark: the approval gate with N requests pending in one process.

For N = 1, 100 and 10,000 calls waiting for approval on a SQLite file database, it measures
  - wake latency: from just before a decision is submitted (its commit included) to the
    tool's first line running (p50, p99, over a sample of decisions),
  - database statements per second while all N wait (counted with SQLAlchemy events),
  - the process's resident memory while all N wait.
Prints one JSON object. Usage: python bench/approval.py [--sizes 1,100,10000] [--idle 5]

``--cross-instance`` measures the same across real `hookgate serve` processes on PostgreSQL
instead (see bench/crossinstance/run.py): python bench/approval.py --cross-instance
[--postgres URL (default: a throwaway cluster with pg_stat_statements)] [--waiting 10000]
[--decisions 200]
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
from pathlib import Path
from typing import Any

from hookgate import Agent, tool
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.catalog.build import build_registry
from hookgate.hooks.services import HookServices
from hookgate.storage.database import Database
from hookgate.tools.calls import CallIdentity, ToolCall
from hookgate.tools.guarded import execute_tool_call
from hookgate.tools.guarded_call import new_call

ARRIVAL_WAVE = 250


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


async def measure(n: int, idle_s: float, sample: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="hookgate-bench-"))
    db = Database(f"sqlite+aiosqlite:///{tmp / 'bench.db'}")
    await db.upgrade()
    approvals = PersistentApprovals(db, sweep_interval=2.0)
    await approvals.start()
    started: dict[str, float] = {}
    pending: dict[str, str] = {}

    @tool(requires_confirmation=True, writes=True)
    async def oa__purchase_pay(call_no: int) -> str:
        """Pay."""
        started[str(call_no)] = time.perf_counter()
        return "paid"

    agent = Agent(id="buyer", name="Buyer", instructions="", tools=[oa__purchase_pay],
                  org_id="acme", confirmation_approver_scope="org_members")
    registry = build_registry(agent, HookServices(approvals=approvals, database=db))
    tools = agent.toolbox()

    def identity(i: int) -> CallIdentity:
        def emit(type_: str, data: dict[str, Any]) -> None:
            if type_ == "confirmation_pending":
                pending[str(i)] = data["request_id"]
        return CallIdentity(agent_id="buyer", user_id="alice", org_id="acme",
                            run_id=f"run_{i}", emit=emit)

    # Calls arrive in waves (as runs reach the gate over time), not all in one instant.
    t_create = time.perf_counter()
    tasks: list[asyncio.Task[Any]] = []
    for start in range(0, n, ARRIVAL_WAVE):
        wave = range(start, min(n, start + ARRIVAL_WAVE))
        tasks += [asyncio.create_task(execute_tool_call(
            new_call(identity(i), ToolCall(f"c{i}", "oa__purchase_pay", {"call_no": i}), tools),
            registry=registry)) for i in wave]
        while len(pending) < wave.stop:
            failed = [t for t in tasks if t.done()]
            if failed:
                raise RuntimeError(f"a call ended before it was pending: {failed[0].result()}")
            await asyncio.sleep(0.01)
    create_s = time.perf_counter() - t_create
    gc.collect()
    await asyncio.sleep(0.5)

    db.queries = 0
    t0 = time.perf_counter()
    await asyncio.sleep(idle_s)
    idle_qps = db.queries / (time.perf_counter() - t0)
    memory = rss_mb()

    latencies: list[float] = []
    who = Approver("bob", "acme")
    chosen = list(range(n))[: min(n, sample)]
    for i in chosen:
        t = time.perf_counter()
        await approvals.decide(pending[str(i)], "approve", who)
        while str(i) not in started:
            await asyncio.sleep(0)
        latencies.append((started[str(i)] - t) * 1000)

    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await approvals.stop()
    await db.dispose()
    return {
        "pending": n,
        "setup_s": round(create_s, 2),
        "wake_latency_ms": {"p50": round(statistics.median(latencies), 2),
                            "p99": round(pct(latencies, 99), 2),
                            "max": round(max(latencies), 2), "decisions": len(latencies)},
        "queries_per_s_while_waiting": round(idle_qps, 2),
        "rss_mb": round(memory, 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1,100,10000")
    parser.add_argument("--idle", type=float, default=None,
                        help="seconds of idle measurement (default 6; 30 --cross-instance, "
                             "so that the 30 s sweeps are counted in their share)")
    parser.add_argument("--sample", type=int, default=1000, help="decisions timed per size")
    parser.add_argument("--cross-instance", action="store_true",
                        help="measure across hookgate serve processes on PostgreSQL")
    parser.add_argument("--postgres", help="PostgreSQL server URL (--cross-instance)")
    parser.add_argument("--waiting", type=int, default=10_000,
                        help="runs waiting during the measurement (--cross-instance)")
    parser.add_argument("--decisions", type=int, default=200,
                        help="decisions timed (--cross-instance)")
    parser.add_argument("--settle", type=float, default=None,
                        help="seconds the database settles before each idle measurement "
                             "(--cross-instance; default 11, since PostgreSQL reports an idle "
                             "backend's transactions up to 10 s late; 0 when only checking "
                             "that the bench runs)")
    args = parser.parse_args()
    if args.cross_instance:
        from crossinstance import run

        run.main(args)
        return
    results = []
    for n in (int(x) for x in args.sizes.split(",")):
        results.append(await measure(n, args.idle or 6.0, args.sample))
    print(json.dumps({
        "benchmark": "approval",
        "python": platform.python_version(),
        "database": "sqlite (file, WAL)",
        "sweep_interval_s": 2.0,
        "targets_at_10000": {"wake_p99_ms": 50, "queries_per_s": 5, "rss_mb": 300},
        "results": results,
    }, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
