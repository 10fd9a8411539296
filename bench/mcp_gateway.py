"""Benchmark: what the MCP gateway adds to a tool call, against calling the server directly.

The downstream server is ``mcp-server-time`` over stdio (``get_current_time``), called by the
official ``mcp`` client
  - directly,
  - through the gateway in process (the SDK's in-process client: the gateway's own work —
    guarded path, hooks, result mapping — plus the same downstream hop),
  - through ``hookgate mcp stdio`` as a subprocess (what a desktop client sees: one more
    JSON-RPC hop over stdio).
Each gateway path runs twice: with only the approval gate (nothing to approve) and with the
audit log, read-only guard and a rate limit declared. Calls alternate between paths in rounds
so machine load hits all of them alike. Prints one JSON object with p50/p99 per path and the
p50 added over the direct call. Usage: python bench/mcp_gateway.py [--calls 300] [--rounds 3] [--quick]
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
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from hookgate.config import load_config
from hookgate.mcp.served import build_mcp_server
from hookgate.mcp.wiring import gateway_for, principal_for
from hookgate.runtime.deployment import deployment_from_config
from hookgate.runtime.runtime import Caller, Runtime

TOKEN = "bench-token"
CONFIG = """\
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme}}]
users: [{{id: ann, org: acme, token: {token}}}]
models: {{idle: {{type: scripted, turns: [{{answer: idle}}]}}}}
mcp_servers:
  - {{id: time, command: {python}, args: [-m, mcp_server_time, --local-timezone, UTC]}}
agents:
  - {{id: bare, org: acme, model: idle, mcp: {{servers: [time]}}}}
  - id: guarded
    org: acme
    model: idle
    mcp: {{servers: [time]}}
    model_config_json:
      hooks:
        class_hooks:
          - audit_log
          - readonly_guard
          - {{name: connector_rate_limit, params: {{limits: {{mcp__time: 1000000/minute}}}}}}
"""
TOOL_ARGS = {"timezone": "UTC"}


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 3),
            "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 3),
            "n": len(ordered)}


async def timed(client: Client, name: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        result = await client.call_tool(name, TOOL_ARGS)
        out.append(time.perf_counter() - start)
        if result.is_error:
            raise RuntimeError(f"{name} failed: {result.content}")
    return out


async def main(calls: int, rounds: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="hookgate-mcp-bench-"))
    config_path = root / "hookgate.yaml"
    config_path.write_text(CONFIG.format(db=root / "bench.db", token=TOKEN,
                                         python=sys.executable))
    runtime = Runtime(deployment_from_config(load_config(config_path)))
    await runtime.db.upgrade()
    await runtime.sync()
    await runtime.approvals.start()
    caller = Caller("ann", "acme", False)
    clients: dict[str, tuple[Client, str]] = {}
    async with AsyncExitStack() as stack:
        direct = StdioServerParameters(command=sys.executable,
                                       args=["-m", "mcp_server_time", "--local-timezone", "UTC"])
        clients["direct"] = (await stack.enter_async_context(Client(direct)),
                             "get_current_time")
        gateways = []
        for agent in ("bare", "guarded"):
            gateway = gateway_for(runtime)
            gateways.append(gateway)
            who = principal_for(runtime, agent, caller, TOKEN)
            assert who is not None
            server = build_mcp_server(gateway, lambda _ctx, who=who: who)
            clients[f"in_process_{agent}"] = (
                await stack.enter_async_context(Client(server)), "mcp__time__get_current_time")
            stdio = StdioServerParameters(
                command=sys.executable,
                args=["-m", "hookgate.cli.main", "mcp", "stdio", "--agent", agent,
                      "--config", str(config_path)],
                env={"HOOKGATE_TOKEN": TOKEN, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
                cwd=str(root))
            clients[f"stdio_{agent}"] = (await stack.enter_async_context(Client(stdio)),
                                         "mcp__time__get_current_time")
        samples: dict[str, list[float]] = {k: [] for k in clients}
        for client, name in clients.values():
            await timed(client, name, 20)  # warm-up: servers started, caches filled
        for _ in range(rounds):
            for key, (client, name) in clients.items():
                samples[key].extend(await timed(client, name, calls // rounds))
        for gateway in gateways:
            await gateway.aclose()
    await runtime.approvals.stop()
    await runtime.db.dispose()
    figures = {key: summary(values) for key, values in samples.items()}
    base = figures["direct"]["p50_ms"]
    return {
        "benchmark": "mcp_gateway",
        "downstream": "mcp-server-time get_current_time over stdio",
        "database": "sqlite file",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "paths": figures,
        "added_p50_ms": {key: round(f["p50_ms"] - base, 3)
                         for key, f in figures.items() if key != "direct"},
        "target_added_p50_ms": 2.0,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per path")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="a few calls per path: checks that the bench runs, not a figure")
    options = parser.parse_args()
    calls, rounds = (6, 1) if options.quick else (options.calls, options.rounds)
    print(json.dumps(asyncio.run(main(calls, rounds)), indent=2))
