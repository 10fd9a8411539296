"""Benchmark: what tracing a call's provenance costs per tool call (hookgate.provenance).

Two agents take turns in one process, call by call, over the same database: one without a
provenance reader (its session's facts are kept, never read for a call) and one whose
``untrusted_target`` hook reads provenance on every call (``writes_only: false``). Each call
is one whole guarded call (`execute_tool_call`, a trivial async tool that writes) in a
session that holds the user's request and ten untrusted results of about a kilobyte (an
inbox), plus the results of the calls before it in the round. Prints one JSON object: per
database, each agent's p50/p99 in microseconds (the median over rounds of each round's
figure), the statements that read the facts per call, and ``lookup_p50_us``: the p50 with
the reader minus the p50 without.

    python bench/provenance.py [--calls 60] [--rounds 5] [--postgres-url URL] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from hookgate import Agent, HookServices, tool
from hookgate.catalog.build import build_registry
from hookgate.hooks.facts import Fact
from hookgate.hooks.registry import HookRegistry
from hookgate.storage.database import Database
from hookgate.tools.calls import CallIdentity, ToolCall
from hookgate.tools.guarded import execute_tool_call
from hookgate.tools.guarded_call import new_call

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import pgcluster

REQUEST = "Summarise my inbox and send the summary to bob@example.org"
MAIL = ("From: colleague{i}@corp.example\nSubject: weekly notes {i}\n"
        + "The numbers for week {i} are in the shared sheet; see https://intranet.example/"
          "notes/{i} for the details. " * 8)


@tool(writes=True)
async def send_email(to: str, body: str) -> str:
    """Send an email."""
    return "sent"


class FactReads:
    """Reads of a session's facts (``DatabaseFacts.facts``): each is one call of its
    backend's ``session_facts``, one statement on either database (SQLAlchemy Core on SQLite,
    the driver on PostgreSQL: decision record 0028)."""

    def __init__(self, db: Database) -> None:
        self.count = 0
        self._db = db
        self._read = db.backend.session_facts

    async def _counted(self, session: str) -> Any:
        self.count += 1
        return await self._read(session)

    def __enter__(self) -> FactReads:
        self._db.backend.session_facts = self._counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *_: object) -> None:
        del self._db.backend.session_facts


def registries(db: Database) -> dict[str, HookRegistry]:
    plain = Agent(id="plain", name="plain", instructions="", tools=[send_email],
                  model_config_json={"hooks": {"untrusted_output": ["read_inbox"]}})
    reader = Agent(id="reader", name="reader", instructions="", tools=[send_email],
                   model_config_json={"hooks": {
                       "untrusted_output": ["read_inbox"],
                       "class_hooks": [{"name": "untrusted_target",
                                        "params": {"writes_only": False}}]}})
    services = HookServices(database=db)
    return {"no_reader": build_registry(plain, services),
            "with_reader": build_registry(reader, services)}


async def session(registry: HookRegistry) -> str:
    run = f"bench-{uuid.uuid4().hex[:12]}"
    await registry.facts.add(run, Fact.request(REQUEST))
    for i in range(10):
        await registry.facts.add(run, Fact.result("read_inbox", MAIL.format(i=i),
                                                  trusted=False, call_id=f"r{i}"))
    return run


async def one_database(url: str, calls: int, rounds: int) -> dict[str, Any]:
    db = Database(url)
    await db.upgrade()
    try:
        regs = registries(db)
        tools = {"send_email": send_email}
        times: dict[str, list[list[float]]] = {name: [] for name in regs}
        read_counts = dict.fromkeys(regs, 0)
        with FactReads(db) as reads:
            for round_no in range(rounds + 1):  # round 0 warms up
                runs = {name: await session(reg) for name, reg in regs.items()}
                spent: dict[str, list[float]] = {name: [] for name in regs}
                for i in range(calls):
                    for name, reg in regs.items():
                        identity = CallIdentity(agent_id=name, user_id="alice", org_id=None,
                                                run_id=runs[name], message=REQUEST)
                        call = new_call(identity, ToolCall(
                            f"c{i}", "send_email",
                            {"to": "bob@example.org", "body": f"summary {i}"}), tools)
                        before = reads.count
                        started = time.perf_counter()
                        outcome = await execute_tool_call(call, registry=reg)
                        spent[name].append((time.perf_counter() - started) * 1e6)
                        if outcome.status != "ok":
                            raise SystemExit(f"{name}: the call did not run: "
                                             f"{outcome.observation}")
                        if round_no:
                            read_counts[name] += reads.count - before
                if round_no:
                    for name in regs:
                        times[name].append(spent[name])
        out: dict[str, Any] = {}
        for name, per_round in times.items():
            p50 = statistics.median(statistics.median(r) for r in per_round)
            p99 = statistics.median(_p99(r) for r in per_round)
            out[name] = {"p50_us": round(p50, 1), "p99_us": round(p99, 1),
                         "fact_reads_per_call": read_counts[name] / (calls * rounds)}
        out["lookup_p50_us"] = round(out["with_reader"]["p50_us"]
                                     - out["no_reader"]["p50_us"], 1)
        return out
    finally:
        await db.dispose()


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def main(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "benchmark": "provenance",
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                    "cpus": os.cpu_count()},
        "calls_per_round": args.calls, "rounds": args.rounds,
        "session": "the request, 10 untrusted results of ~1 KB, the round's earlier results",
    }
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        result["sqlite"] = await one_database(url, args.calls, args.rounds)
    pg = args.postgres_url or os.environ.get("HOOKGATE_TEST_POSTGRES_URL")
    if pg:
        pg_url = await asyncio.to_thread(pgcluster.create_database, pg, "bench_prov_")
        try:
            result["postgresql"] = await one_database(pg_url, args.calls, args.rounds)
        finally:
            await asyncio.to_thread(pgcluster.drop_database, pg, pg_url)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres-url")
    parser.add_argument("--quick", action="store_true", help="a few calls, two rounds")
    ns = parser.parse_args()
    if ns.quick:
        ns.calls, ns.rounds = 10, 2
    print(json.dumps(asyncio.run(main(ns)), indent=2))
