"""Benchmark: the latency hookgate adds to an ungated tool call of an agent that runs
elsewhere, against the framework's tool call without hookgate, measured side by side.

The tool is a LangChain tool (``tool.invoke``: the framework's own call path). Each guarded
call asks hookgate before (``before_call``: PreToolUse hooks, the gate, the ledger's start
claim) and reports after (``report``: PostToolUse, the audit row), through
  - the in-process guard (``hookgate.client.local.LocalGuard``, SQLite), and
  - the HTTP client over loopback to a real ``hookgate serve`` (SQLite).
The agent declares the audit log and the read-only guard; nothing needs approval. Paths
alternate in rounds so machine load hits all of them alike. Prints one JSON object with
p50/p99 per path and the p50/p99 added over the bare call.
Usage: python bench/guarded_calls.py [--calls 300] [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from langchain_core.tools import tool

from hookgate.client import Allowed, Client
from hookgate.client.local import LocalGuard

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token"
CONFIG = """\
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme}}]
users: [{{id: ann, org: acme, token: {token}}}]
models: {{idle: {{type: scripted, turns: [{{answer: idle}}]}}}}
agents:
  - id: agent
    org: acme
    owner: ann
    model: idle
    model_config_json:
      hooks: {{class_hooks: [audit_log, readonly_guard]}}
      guarded_calls: {{rules: [{{matcher: search, writes: false}}]}}
"""


@tool
def search(query: str) -> str:
    """Search the catalogue."""
    return f"3 results for {query}"


def _guarded(guard: Any, session: str) -> Callable[[int], None]:
    def call(i: int) -> None:
        args = {"query": f"q{i}"}
        verdict = guard.before_call(agent="agent", session_id=session, call_id=f"c{i}",
                                    tool="search", arguments=args)
        assert isinstance(verdict, Allowed), verdict
        guard.report(verdict.call, output=search.invoke(verdict.arguments))
    return call


def _figure(samples: list[float], bare: list[float] | None = None) -> dict[str, Any]:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    out: dict[str, Any] = {"p50_us": round(p50 * 1e6, 1), "p99_us": round(p99 * 1e6, 1)}
    if bare is not None:
        base = _figure(bare)
        out["added_p50_us"] = round(out["p50_us"] - base["p50_us"], 1)
        out["added_p99_us"] = round(out["p99_us"] - base["p99_us"], 1)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(config: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hookgate.cli.main", "serve", "--config", str(config),
             "--port", str(port), "--log-level", "warning"],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(
                [str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])})
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"hookgate serve exited: {log.read_text()[-2000:]}")
        try:
            httpx.get(url + "/", timeout=1)
            return proc, url
        except httpx.TransportError:
            time.sleep(0.01)
    proc.kill()
    raise SystemExit("hookgate serve did not come up within 90 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per path per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a few calls (for the tests)")
    opts = parser.parse_args()
    calls, rounds = (20, 1) if opts.quick else (opts.calls, opts.rounds)
    with tempfile.TemporaryDirectory(prefix="hookgate-bench-") as tmp:
        work = Path(tmp)
        local_config = work / "local.yaml"
        local_config.write_text(CONFIG.format(db=work / "local.db", token=TOKEN))
        served_config = work / "served.yaml"
        served_config.write_text(CONFIG.format(db=work / "served.db", token=TOKEN))
        proc, url = _serve(served_config, work / "serve.log")
        local = LocalGuard(local_config, framework="bench")
        remote = Client(url, TOKEN, framework="bench")
        paths: dict[str, Callable[[int], None]] = {
            "framework_tool_call": lambda i: search.invoke({"query": f"q{i}"}) and None,
            "in_process": _guarded(local, f"s-{uuid.uuid4().hex}"),
            "loopback_http": _guarded(remote, f"s-{uuid.uuid4().hex}"),
        }
        samples: dict[str, list[float]] = {name: [] for name in paths}
        try:
            for run in paths.values():  # warm-up: connections, statements, imports
                for i in range(5):
                    run(-1 - i)
            n = 0
            for _ in range(rounds):
                for name, run in paths.items():
                    for _ in range(calls):
                        n += 1
                        started = time.perf_counter()
                        run(n)
                        samples[name].append(time.perf_counter() - started)
        finally:
            remote.close()
            local.close()
            proc.terminate()
            proc.wait(30)
    bare = samples["framework_tool_call"]
    print(json.dumps({
        "benchmark": "guarded_calls",
        "calls_per_path": calls * rounds,
        "framework_tool_call": _figure(bare),
        "in_process": _figure(samples["in_process"], bare),
        "loopback_http": _figure(samples["loopback_http"], bare),
        "database": "sqlite",
        "hooks": ["audit_log", "readonly_guard"],
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
    }, indent=2))


if __name__ == "__main__":
    main()
