"""What a Cedar policy decision costs per call, for 10 and for 1,000 policies, side by
side with a hand-written Python hook making the same check.

The policies are the seed's three invariants (audit every sensitive call, no writes in a
read-only org, payments above 50,000 need a person) plus forbids of single vendors up to
the count. Figures (p50/p99 in microseconds, one call each):

  - ``cedar``: `LivePolicySet.decide` as the ``cedar_policy`` hook calls it: the files'
    fingerprint, the request and entities built from the call's facts, the engine's answer
    and its explanation.
  - ``cedar_engine_only``: the same without the look at the files.
  - ``python_hook``: a Python function with the same three invariants and the blocked
    vendors as a set.

Calls alternate between an allowed, an asked and a denied payment.

    python bench/policy_eval.py [--calls 3000] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from hookgate import tool
from hookgate.policies import CallFacts
from hookgate.policies.decision import decide
from hookgate.policies.live import LivePolicySet

INVARIANTS = """\
@id("tools-allowed")
permit(principal, action in Action::"call_tool", resource);
@id("audit-sensitive")
@reason("sensitive calls run only on agents that keep an audit log")
forbid(principal, action in Action::"call_tool", resource)
when { (context.writes || context.requires_confirmation) && !resource.audited };
@id("read-only-org")
@reason("the org is read-only")
forbid(principal, action in Action::"call_tool", resource)
when { context.writes && context.org_read_only };
@id("big-payments")
@ask("payments above 50,000 need a person")
permit(principal, action == Action::"oa__purchase_pay", resource)
when { context.args.amount.greaterThan(decimal("50000.0")) };
"""
INVARIANT_COUNT = 4


@tool(writes=True)
async def oa__purchase_pay(amount: float, vendor: str) -> str:
    """Pay a vendor."""
    return "paid"


def policy_text(count: int) -> str:
    vendors = "\n".join(
        f'@id("vendor-{i}")\nforbid(principal, action == Action::"oa__purchase_pay", '
        f'resource) when {{ context.args.vendor == "blocked-{i}" }};'
        for i in range(count - INVARIANT_COUNT))
    return INVARIANTS + vendors + "\n"


def python_hook(count: int) -> Callable[[CallFacts], str]:
    blocked = frozenset(f"blocked-{i}" for i in range(count - INVARIANT_COUNT))

    def check(facts: CallFacts) -> str:
        sensitive = facts.writes or facts.requires_confirmation
        if sensitive and not facts.agent_audited:
            return "deny"
        if facts.writes and facts.org_read_only:
            return "deny"
        if facts.tool_name == "oa__purchase_pay":
            if facts.args.get("vendor") in blocked:
                return "deny"
            if facts.args["amount"] > 50_000:
                return "ask"
        return "allow"

    return check


def calls() -> list[CallFacts]:
    base: dict[str, Any] = {"tool_name": "oa__purchase_pay", "user_id": "alice",
                            "org_id": "acme", "agent_id": "buyer", "agent_audited": True,
                            "writes": True, "connector": "oa"}
    return [CallFacts(args={"amount": 100.0, "vendor": "ACME"}, **base),
            CallFacts(args={"amount": 60000.0, "vendor": "ACME"}, **base),
            CallFacts(args={"amount": 100.0, "vendor": "blocked-3"}, **base)]


def timed(fn: Callable[[CallFacts], Any], n: int) -> dict[str, float]:
    facts = calls()
    for f in facts:  # warm
        fn(f)
    samples = []
    for i in range(n):
        f = facts[i % len(facts)]
        start = time.perf_counter_ns()
        fn(f)
        samples.append((time.perf_counter_ns() - start) / 1000)
    samples.sort()
    return {"p50_us": round(statistics.median(samples), 2),
            "p99_us": round(samples[min(len(samples) - 1, int(len(samples) * 0.99))], 2)}


def measure(count: int, n: int, workdir: Path) -> dict[str, Any]:
    folder = workdir / f"p{count}"
    folder.mkdir()
    (folder / "policies.cedar").write_text(policy_text(count), encoding="utf-8")
    started = time.perf_counter()
    live = LivePolicySet(folder, "deny", [oa__purchase_pay])
    load_ms = (time.perf_counter() - started) * 1000
    python = python_hook(count)
    expected = ["allow", "ask", "deny"]
    assert [live.decide(f).effect for f in calls()] == expected
    assert [python(f) for f in calls()] == expected
    loaded = live.loaded
    return {
        "policies": len(loaded.policies),
        "load_and_validate_ms": round(load_ms, 1),
        "cedar": timed(live.decide, n),
        "cedar_engine_only": timed(lambda f: decide(loaded, f), n),
        "python_hook": timed(python, n),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--quick", action="store_true", help="300 calls per figure")
    args = parser.parse_args()
    n = 300 if args.quick else args.calls
    with tempfile.TemporaryDirectory() as tmp:
        results = {str(count): measure(count, n, Path(tmp)) for count in (10, 1000)}
    from importlib.metadata import version

    print(json.dumps({
        "benchmark": "policy_eval",
        "calls_per_figure": n,
        "cedarpy": version("cedarpy"),
        "python": platform.python_version(),
        # The machine is shared: the 1-minute load average says how quiet it was.
        "load_average_1m": round(os.getloadavg()[0], 2),
        "results": results,
    }, indent=2))


if __name__ == "__main__":
    main()
