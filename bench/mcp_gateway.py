"""Benchmark: what the MCP gateway adds to a tool call, side by side with FastMCP's proxy.

The downstream server is ``mcp-server-time`` over stdio (``get_current_time``), called by the
official ``mcp`` client
  - directly (``direct``),
  - through the gateway in this process (``in_process_*``: the SDK's in-memory client; the
    gateway's own work — guarded path, hooks, result mapping — plus the same downstream hop),
  - through ``hookgate mcp stdio`` as a subprocess (``stdio_*``: the thin client a desktop
    client starts, relaying to ``hookgate serve`` over its one WebSocket;
    ``stdio_http_bare``: the same relay with ``--connection http``, an HTTP request per
    message; ``stdio_in_process_bare``: the gateway itself in that process, ``--in-process``),
  - over streamable HTTP to a ``hookgate serve`` subprocess (``http_*``),
  - through FastMCP's proxy of the same server over streamable HTTP and stdio
    (``fastmcp_proxy_*``), when FastMCP is installed (``pip install fastmcp``, in this
    Python or in the one ``--fastmcp-python`` names).
Each gateway path runs with only the approval gate (``bare``: nothing to approve) and, for
in-process, stdio and HTTP, with the audit log, read-only guard and a rate limit declared
(``guarded``). Calls alternate between paths in rounds so machine load hits all of them
alike. Prints one JSON object with p50/p99 per path, the p50 added over the direct call, the
HTTP gateway's p50 against FastMCP's HTTP proxy, and where each path spends CPU: the
microseconds per call of each process on it (this client — with the gateway itself for the
in-process paths —, ``hookgate serve``, the stdio relay, the downstream server, FastMCP's
proxy), which on a loaded machine says more than the latencies.
With ``--against SRC`` (or ``--compare-src SRC``) the stdio relay and a ``hookgate serve`` of
another source tree take their turn too (``stdio_bare_against``, ``stdio_guarded_against``;
their CPU as ``relay_against`` and ``serve_against``), so a change is measured against the
tree before it in one run; ``stdio_guarded_over_fastmcp_stdio`` then has both trees' guarded
relay against FastMCP's stdio proxy (issue #42's goal: at most 0.5 of what it adds).
Usage: python bench/mcp_gateway.py [--calls 300] [--rounds 3] [--quick] [--fastmcp-python PY]
                                   [--against SRC]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx2
import psutil
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

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
GATEWAY_TOOL = "mcp__time__get_current_time"
#: FastMCP's proxy of the time server, run by the Python that has FastMCP.
FASTMCP_PROXY = """\
import sys
from fastmcp.server import create_proxy
proxy = create_proxy({{"mcpServers": {{"time": {{"command": {python!r},
    "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}}}}}}, name="proxy")
if sys.argv[1] == "http":
    proxy.run(transport="http", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False,
              log_level="warning")
else:
    proxy.run(transport="stdio", show_banner=False)
"""


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 3),
            "p99_ms": round(ordered[max(int(len(ordered) * 0.99) - 1, 0)] * 1000, 3),
            "n": len(ordered)}


#: The base URL of the ``--against`` tree's server, once it runs.
AGAINST_URL: list[str] = []


def role(proc: psutil.Process) -> str:
    """What a process of this bench is, by its command line (and, for the ``--against``
    tree's relay, the server it relays to)."""
    try:
        line = " ".join(proc.cmdline())
        against = (" serve " in line and "against.yaml" in line) or (
            " mcp stdio " in line and proc.environ().get("HOOKGATE_URL") in AGAINST_URL)
    except psutil.Error:
        return "gone"
    if against:
        return "serve_against" if " serve " in line else "relay_against"
    for marker, name in (("mcp_server_time", "downstream"), (" serve ", "serve"),
                         ("--in-process", "stdio_in_process"), (" mcp stdio ", "relay"),
                         ("fastmcp_proxy", "fastmcp_proxy")):
        if marker in line:
            return name
    return "other"


def cpu_snapshot() -> dict[int, tuple[str, float]]:
    """CPU seconds so far of this process and every process it started."""
    me = psutil.Process()
    out: dict[int, tuple[str, float]] = {}
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        out[proc.pid] = ("client" if proc.pid == me.pid else role(proc),
                         times.user + times.system)
    return out


def cpu_spent(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
              into: dict[str, float]) -> None:
    for pid, (name, seconds) in after.items():
        spent = seconds - before.get(pid, (name, 0.0))[1]
        if spent > 0:
            into[name] = into.get(name, 0.0) + spent


async def timed(client: Client, name: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        result = await client.call_tool(name, TOOL_ARGS)
        out.append(time.perf_counter() - start)
        if result.is_error:
            raise RuntimeError(f"{name} failed: {result.content}")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def process(cmd: list[str], ready_url: str, log: Path, **options: Any) -> Iterator[None]:
    """A server subprocess, once ``ready_url`` answers."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, **options)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{cmd[:4]} exited: {log.read_text()[-2000:]}")
            try:
                httpx2.get(ready_url, timeout=1)
                break
            except httpx2.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{cmd[:4]} did not come up") from None
                time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def fastmcp_python(given: str | None) -> str | None:
    """The Python that can run FastMCP's proxy: ``given``, or this one when it has it."""
    if given:
        return given
    return sys.executable if importlib.util.find_spec("fastmcp") is not None else None


@contextlib.asynccontextmanager
async def http_client(url: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0))
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


async def main(calls: int, rounds: int, fastmcp: str | None,
               against: str | None = None, warm_up: int = 20) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="hookgate-mcp-bench-"))
    config_path = root / "hookgate.yaml"
    config_path.write_text(CONFIG.format(db=root / "bench.db", token=TOKEN,
                                         python=sys.executable))
    runtime = Runtime(deployment_from_config(load_config(config_path)))
    await runtime.db.upgrade()
    await runtime.sync()
    await runtime.approvals.start()
    caller = Caller("ann", "acme", False)
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    serve_port = free_port()
    serve_url = f"http://127.0.0.1:{serve_port}"
    clients: dict[str, tuple[Client, str]] = {}
    skipped: dict[str, str] = {}
    with contextlib.ExitStack() as procs:
        procs.enter_context(process(
            [sys.executable, "-m", "hookgate.cli.main", "serve", "--config", str(config_path),
             "--port", str(serve_port), "--log-level", "warning"],
            f"{serve_url}/openapi.json", root / "serve.log", env=env, cwd=root))
        against_url = None
        if against is not None:
            against_config = root / "against.yaml"  # a SQLite file serves one instance
            against_config.write_text(CONFIG.format(db=root / "against.db", token=TOKEN,
                                                    python=sys.executable))
            against_port = free_port()
            against_url = f"http://127.0.0.1:{against_port}"
            AGAINST_URL.append(against_url)
            procs.enter_context(process(
                [sys.executable, "-m", "hookgate.cli.main", "serve", "--config",
                 str(against_config), "--port", str(against_port), "--log-level", "warning"],
                f"{against_url}/openapi.json", root / "against.log",
                env={**env, "PYTHONPATH": against}, cwd=root))
        proxy_url = None
        if fastmcp is not None:
            script = root / "fastmcp_proxy.py"
            script.write_text(FASTMCP_PROXY.format(python=sys.executable))
            proxy_port = free_port()
            proxy_url = f"http://127.0.0.1:{proxy_port}/mcp"
            procs.enter_context(process([fastmcp, str(script), "http", str(proxy_port)],
                                        f"http://127.0.0.1:{proxy_port}/",
                                        root / "fastmcp.log", cwd=root))
        else:
            skipped["fastmcp_proxy_*"] = ("FastMCP is not installed here: pip install fastmcp, "
                                          "or pass --fastmcp-python")
        async with AsyncExitStack() as stack:
            async def add(key: str, client: Any, tool: str = GATEWAY_TOOL) -> None:
                clients[key] = (await stack.enter_async_context(client), tool)

            await add("direct", Client(StdioServerParameters(
                command=sys.executable,
                args=["-m", "mcp_server_time", "--local-timezone", "UTC"])),
                "get_current_time")
            gateways = []
            for agent in ("bare", "guarded"):
                gateway = gateway_for(runtime)
                gateways.append(gateway)
                who = principal_for(runtime, agent, caller, TOKEN)
                assert who is not None
                server = build_mcp_server(gateway, lambda _ctx, who=who: who)
                await add(f"in_process_{agent}", Client(server))
                await add(f"stdio_{agent}", Client(StdioServerParameters(
                    command=sys.executable,
                    args=["-m", "hookgate.cli.main", "mcp", "stdio", "--agent", agent],
                    env={"HOOKGATE_TOKEN": TOKEN, "HOOKGATE_URL": serve_url,
                         "PYTHONPATH": env["PYTHONPATH"]}, cwd=str(root))))
                await add(f"http_{agent}", http_client(f"{serve_url}/mcp/{agent}", TOKEN))
            await add("stdio_http_bare", Client(StdioServerParameters(
                command=sys.executable,
                args=["-m", "hookgate.cli.main", "mcp", "stdio", "--agent", "bare",
                      "--connection", "http"],
                env={"HOOKGATE_TOKEN": TOKEN, "HOOKGATE_URL": serve_url,
                     "PYTHONPATH": env["PYTHONPATH"]}, cwd=str(root))))
            await add("stdio_in_process_bare", Client(StdioServerParameters(
                command=sys.executable,
                args=["-m", "hookgate.cli.main", "mcp", "stdio", "--agent", "bare",
                      "--in-process", "--config", str(config_path)],
                env={"HOOKGATE_TOKEN": TOKEN, "PYTHONPATH": env["PYTHONPATH"]},
                cwd=str(root))))
            if against is not None and against_url is not None:
                for agent in ("bare", "guarded"):
                    await add(f"stdio_{agent}_against", Client(StdioServerParameters(
                        command=sys.executable,
                        args=["-m", "hookgate.cli.main", "mcp", "stdio", "--agent", agent],
                        env={"HOOKGATE_TOKEN": TOKEN, "HOOKGATE_URL": against_url,
                             "PYTHONPATH": against}, cwd=str(root))))
            if fastmcp is not None and proxy_url is not None:
                await add("fastmcp_proxy_http", http_client(proxy_url, None),
                          "get_current_time")
                await add("fastmcp_proxy_stdio", Client(StdioServerParameters(
                    command=fastmcp, args=[str(root / "fastmcp_proxy.py"), "stdio"],
                    cwd=str(root))), "get_current_time")
            samples: dict[str, list[float]] = {k: [] for k in clients}
            for client, name in clients.values():
                await timed(client, name, warm_up)  # servers started, caches filled
            cpu: dict[str, dict[str, float]] = {k: {} for k in clients}
            for _ in range(rounds):
                for key, (client, name) in clients.items():
                    before = cpu_snapshot()
                    samples[key].extend(await timed(client, name, calls // rounds))
                    cpu_spent(before, cpu_snapshot(), cpu[key])
            for gateway in gateways:
                await gateway.aclose()
    await runtime.approvals.stop()
    await runtime.db.dispose()
    figures = {key: summary(values) for key, values in samples.items()}
    base = figures["direct"]["p50_ms"]
    out: dict[str, Any] = {
        "benchmark": "mcp_gateway",
        "downstream": "mcp-server-time get_current_time over stdio",
        "database": "sqlite file",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "paths": figures,
        "added_p50_ms": {key: round(f["p50_ms"] - base, 3)
                         for key, f in figures.items() if key != "direct"},
        "cpu_us_per_call": {key: {name: round(seconds / len(samples[key]) * 1e6)
                                  for name, seconds in sorted(spent.items())}
                            for key, spent in cpu.items()},
        "target_added_p50_ms": 2.0,
        "skipped": skipped,
    }
    if "fastmcp_proxy_stdio" in figures:
        # The goal: the stdio relay adds at most half of what FastMCP's stdio proxy adds;
        # its CPU (relay + serve) against the proxy's, the measure a loaded machine keeps.
        relay_cpu = sum(out["cpu_us_per_call"]["stdio_bare"].get(k, 0)
                        for k in ("relay", "serve"))
        proxy_cpu = out["cpu_us_per_call"]["fastmcp_proxy_stdio"].get("fastmcp_proxy", 0)
        out["stdio_relay_over_fastmcp_stdio"] = {
            "added_p50": round(out["added_p50_ms"]["stdio_bare"]
                               / max(out["added_p50_ms"]["fastmcp_proxy_stdio"], 1e-3), 2),
            "cpu_per_call": round(relay_cpu / max(proxy_cpu, 1), 2),
            "target": 0.5,
        }
    if "stdio_bare_against" in figures and "fastmcp_proxy_stdio" in figures:
        cpu_against = out["cpu_us_per_call"]["stdio_bare_against"]
        proxy_cpu = out["cpu_us_per_call"]["fastmcp_proxy_stdio"].get("fastmcp_proxy", 0)
        out["stdio_relay_against_over_fastmcp_stdio"] = {
            "added_p50": round(out["added_p50_ms"]["stdio_bare_against"]
                               / max(out["added_p50_ms"]["fastmcp_proxy_stdio"], 1e-3), 2),
            "cpu_per_call": round(sum(cpu_against.get(k, 0)
                                      for k in ("relay_against", "serve_against"))
                                  / max(proxy_cpu, 1), 2),
        }
    if "fastmcp_proxy_stdio" in figures:
        # The goal's own figure: the guarded relay (hooks on) over the proxy, per tree.
        proxy_added = max(out["added_p50_ms"]["fastmcp_proxy_stdio"], 1e-3)
        proxy_cpu = out["cpu_us_per_call"]["fastmcp_proxy_stdio"].get("fastmcp_proxy", 0)
        guarded: dict[str, Any] = {"target": 0.5}
        for key, relay, serve in (("stdio_guarded", "relay", "serve"),
                                  ("stdio_guarded_against", "relay_against", "serve_against")):
            if key in figures:
                spent = out["cpu_us_per_call"][key]
                guarded[key] = {
                    "added_p50": round(out["added_p50_ms"][key] / proxy_added, 2),
                    "cpu_per_call": round((spent.get(relay, 0) + spent.get(serve, 0))
                                          / max(proxy_cpu, 1), 2)}
        out["stdio_guarded_over_fastmcp_stdio"] = guarded
    if "fastmcp_proxy_http" in figures:
        out["http_bare_minus_fastmcp_http_p50_ms"] = round(
            figures["http_bare"]["p50_ms"] - figures["fastmcp_proxy_http"]["p50_ms"], 3)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per path")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="two calls per path after one warm-up call: checks that the "
                             "bench runs, not a figure")
    parser.add_argument("--against", "--compare-src", metavar="SRC", dest="against",
                        help="also relay through a hookgate serve of this source tree")
    parser.add_argument("--fastmcp-python", default=os.environ.get("FASTMCP_PYTHON"),
                        help="a Python with FastMCP installed (default: this one, if it has it)")
    options = parser.parse_args()
    calls, rounds = (2, 1) if options.quick else (options.calls, options.rounds)
    print(json.dumps(asyncio.run(main(calls, rounds, fastmcp_python(options.fastmcp_python),
                                      options.against, warm_up=1 if options.quick else 20)),
                     indent=2))
