"""What `hookgate policy replay` costs: recorded calls replayed per second through a
candidate policy set, beside the same calls decided live one by one (the baseline).

A SQLite audit log is filled with ``--calls`` recorded calls (bulk-written through the
audit store, hash chains and masking as always), then, ``--runs`` times:

  - ``replay``: `replay_candidate` (what the command runs): read the period's rows, rebuild
    each call, decide it with the candidate (`CaseDecider`, the ``cedar_policy`` hook's own
    decision) and group the changes;
  - ``live_decisions``: the candidate deciding the same calls from their original arguments
    (no rows read): what the decisions alone cost.

The figures are medians over the runs; the goal is 50,000 replayed calls a minute on two
cores.

    python bench/policy_replay.py [--calls 50000] [--runs 3] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hookgate import tool
from hookgate.catalog.builtin.audit_log import AuditLog
from hookgate.cli.policy_cmd import CaseDecider, replay_candidate
from hookgate.config import load_config
from hookgate.hooks.model import HookContext, HookPoint
from hookgate.policies.cases import PolicyCase
from hookgate.storage.audit import AuditLogStore, AuditRecord
from hookgate.storage.database import Database

GOAL_PER_MINUTE = 50_000
POLICIES = """\
@id("tools-allowed")
permit(principal, action in Action::"call_tool", resource);
@id("read-only-org")
@reason("the org is read-only")
forbid(principal, action in Action::"call_tool", resource)
when { context.writes && context.org_read_only };
@id("big-payments")
@ask("payments above 50,000 need a person")
permit(principal, action == Action::"pay", resource)
when { context.args.amount.greaterThan(decimal("50000.0")) };
@id("no-night-payments")
@reason("no payments at night")
forbid(principal, action == Action::"pay", resource)
when { context.hour < 6 };
"""
CONFIG = """\
database: {db}
orgs: [{{id: acme, read_only: false}}, {{id: ro, read_only: true}}]
users:
  - {{id: alice, org: acme, admin: true}}
  - {{id: bob, org: acme}}
  - {{id: carol, org: ro}}
tools: [policy_replay:pay, policy_replay:lookup]
models: {{script: {{type: scripted, turns: [{{answer: done}}]}}}}
agents:
  - {{id: buyer, org: acme, model: script, tools: [pay, lookup]}}
policies:
  - {{org: acme, path: candidate, default: deny}}
"""
START = datetime(2026, 11, 2, tzinfo=UTC)


@tool(writes=True)
async def pay(amount: float, vendor: str, units: int = 1) -> str:
    """Pay a vendor."""
    return "paid"


@tool
async def lookup(customer: str) -> str:
    """Look a customer up."""
    return customer


def calls(count: int) -> list[dict[str, Any]]:
    rng = random.Random(46)
    out = []
    for i in range(count):
        if rng.random() < 0.2:
            name, args = "lookup", {"customer": rng.choice(["Globex", "Initech"])}
        else:
            name = "pay"
            args = {"amount": rng.choice([10, 12000, 60000.25]),
                    "vendor": rng.choice(["ACME", "Globex"]), "units": rng.randrange(1, 9)}
        out.append({"i": i, "user": rng.choice(["alice", "bob"]), "tool": name, "args": args,
                    "at": START + timedelta(seconds=rng.randrange(7 * 86_400)),
                    "blocked": rng.random() < 0.2})
    return out


async def record(url: str, made: list[dict[str, Any]]) -> None:
    hook = AuditLog(sink=None)  # type: ignore[arg-type]
    records: list[AuditRecord] = []
    for call in made:
        ctx = HookContext(hook_point=HookPoint.PRE_TOOL_USE, tool_name=call["tool"],
                          tool_args=call["args"], agent_id="buyer", user_id=call["user"],
                          metadata={"org_id": "acme", "execution_path": "react"})
        row = hook.record(ctx, call["args"], "blocked" if call["blocked"] else "ok",
                          "cedar_policy" if call["blocked"] else None, None)
        records.append(dataclasses.replace(row, created_at=call["at"]))
    db = Database(url)
    try:
        await db.upgrade()
        store = AuditLogStore(db)
        for start in range(0, len(records), 5000):
            await store._write(records[start:start + 5000])
    finally:
        await db.dispose()


async def live(cfg: Any, made: list[dict[str, Any]]) -> None:
    decider = CaseDecider(cfg)
    for call in made:
        await decider.decide(PolicyCase(name="live", user=call["user"], tool=call["tool"],
                                        expect="allow", args=call["args"], agent="buyer",
                                        now=call["at"].isoformat()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="2,000 calls, one run")
    args = parser.parse_args()
    count, runs = (2000, 1) if args.quick else (args.calls, args.runs)
    made = calls(count)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "candidate").mkdir()
        (base / "candidate" / "rules.cedar").write_text(POLICIES, encoding="utf-8")
        url = f"sqlite+aiosqlite:///{base / 'hookgate.db'}"
        (base / "hookgate.yaml").write_text(CONFIG.format(db=url), encoding="utf-8")
        cfg = load_config(base / "hookgate.yaml")
        asyncio.run(record(url, made))
        replay_s, live_s, changed = [], [], None
        for _ in range(runs):
            began = time.perf_counter()
            report = asyncio.run(replay_candidate(cfg, url, START, START + timedelta(days=8)))
            replay_s.append(time.perf_counter() - began)
            assert report.replayed == count, report.as_dict()
            changed = report.changed
            began = time.perf_counter()
            asyncio.run(live(cfg, made))
            live_s.append(time.perf_counter() - began)
    replay_rate = count / statistics.median(replay_s)
    live_rate = count / statistics.median(live_s)
    print(json.dumps({
        "benchmark": "policy_replay",
        "calls": count,
        "runs": runs,
        "changed": changed,
        "replay_calls_per_s": round(replay_rate),
        "replay_calls_per_minute": round(replay_rate * 60),
        "live_decisions_per_s": round(live_rate),
        "replay_s": [round(s, 3) for s in replay_s],
        "live_decisions_s": [round(s, 3) for s in live_s],
        "goal_calls_per_minute": GOAL_PER_MINUTE,
        "goal_met": replay_rate * 60 >= GOAL_PER_MINUTE,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        # The machine is shared: the 1-minute load average says how quiet it was.
        "load_average_1m": round(os.getloadavg()[0], 2),
    }, indent=2))


if __name__ == "__main__":
    main()
