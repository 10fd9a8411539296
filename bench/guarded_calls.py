"""Benchmark: the latency hookgate adds to an ungated tool call of an agent that runs
elsewhere, against the framework's tool call without hookgate and against the floor of the
HTTP path, measured side by side in one interleaved run.

The tool is a LangChain tool (``tool.invoke``: the framework's own call path). Each guarded
call asks hookgate before (``before_call``: PreToolUse hooks, the gate, the ledger's start
claim) and reports after (``report``: PostToolUse, the audit row), through
  - the in-process guard (``hookgate.client.local.LocalGuard``, SQLite; and
    ``AsyncLocalGuard`` on a loop of the caller's thread, without LocalGuard's thread hops),
    and
  - the HTTP client over loopback to a real ``hookgate serve`` (SQLite).
The floor: the same tool call with two plain loopback HTTP round trips (an httpx client, as
hookgate's, posting JSON to a bare ASGI app under uvicorn, the server ``hookgate serve``
runs on), which is what any guard in another process pays at least. ``--against SRC`` adds
a ``hookgate serve`` of another source tree (say, the commit before a change), in turns
with this one, and an in-process guard of each tree in a process of its own (its latency
as it measures it, its process's CPU per call). The agent declares the audit log and the
read-only guard; nothing needs approval. The paths take turns call by call, so machine
load hits all of them alike. With ``--in-blocks`` each path makes its calls of a round one
after another instead: a process's work between calls (a SQLite file's checkpoint runs on a
thread of its own) then lands on its own calls, not on the next path's, which is what the
p99 of one guard alone needs. With ``--postgres-url URL`` every path keeps its records in a
database of its own on that PostgreSQL server (made for the run, dropped after it) instead of
a SQLite file.
Prints one JSON object with p50/p99 per path, the p50/p99 added over the bare call, each
server's CPU per guarded call, the ratios to the floor, and what each hookgate server adds
beyond the floor (p50, p99 and server CPU per call; the 1 ms goal is over the floor).
Usage: python bench/guarded_calls.py [--calls 300] [--rounds 3] [--quick] [--against SRC]
       [--in-blocks] [--postgres-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
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
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
from langchain_core.tools import tool

from hookgate.client import Allowed, Client
from hookgate.client.local import AsyncLocalGuard, LocalGuard

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import pgcluster  # noqa: E402

TOKEN = "bench-token"
#: The floor's server: a bare ASGI app answering each POST with the JSON it was sent.
FLOOR_APP = """\
import sys
import uvicorn


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body or b"{}"})


uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""
#: An in-process guard of one source tree in a process of its own (``--against``): each line
#: on stdin is a call number; it makes that guarded call through ``LocalGuard`` and answers
#: the call's duration in seconds (its CPU per call is read from /proc).
LOCAL_CHILD = """\
import sys, time, uuid
from langchain_core.tools import tool
from hookgate.client import Allowed
from hookgate.client.local import LocalGuard


@tool
def search(query: str) -> str:
    \"\"\"Search the catalogue.\"\"\"
    return f"3 results for {query}"


guard = LocalGuard(sys.argv[1], framework="bench")
session = f"s-{uuid.uuid4().hex}"
print("ready", flush=True)
for line in sys.stdin:
    i = int(line)
    started = time.perf_counter()
    verdict = guard.before_call(agent="agent", session_id=session, call_id=f"c{i}",
                                tool="search", arguments={"query": f"q{i}"})
    assert isinstance(verdict, Allowed), verdict
    guard.report(verdict.call, output=search.invoke(verdict.arguments))
    print(time.perf_counter() - started, flush=True)
guard.close()
"""
CONFIG = """\
database: {database}
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


class Databases:
    """Each path's database: a SQLite file in ``work``, or, with ``postgres`` (a server's
    URL), a database of its own on that server, dropped when the stack closes."""

    def __init__(self, work: Path, postgres: str | None, stack: ExitStack) -> None:
        self.work, self.postgres, self.stack = work, postgres, stack
        self.on_postgres: dict[str, str] = {}  # path -> its database's name

    def config(self, name: str) -> Path:
        """``name``'s configuration file, on a database of its own."""
        if self.postgres is None:
            database = f"sqlite+aiosqlite:///{self.work / name}.db"
        else:
            server = self.postgres
            database = pgcluster.create_database(server, "bench_")
            self.stack.callback(pgcluster.drop_database, server, database)
            self.on_postgres[name] = database.rpartition("/")[2]
        config = self.work / f"{name}.yaml"
        config.write_text(CONFIG.format(database=database, token=TOKEN))
        return config

    def backends_cpu(self) -> dict[str, Any]:
        """Per path on PostgreSQL, what its database's backends spend from now on
        (``bench/durable_path.py``'s `BackendCpu`, started; stopped with the stack)."""
        if self.postgres is None:
            return {}
        from durable_path import BackendCpu

        admin = self.postgres.replace("postgresql+asyncpg://", "postgresql://")
        tracked = {name: BackendCpu(admin, database)
                   for name, database in self.on_postgres.items()}
        for cpu in tracked.values():
            cpu.start()
            self.stack.callback(cpu.stop)
        return tracked


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


def _guarded_async(guard: AsyncLocalGuard, loop: asyncio.AbstractEventLoop,
                   session: str) -> Callable[[int], None]:
    """The same call through the async guard on a loop of the caller's thread: no thread
    hop (LocalGuard hops to its loop's thread and back for the ask and for the report)."""
    async def call(i: int) -> None:
        args = {"query": f"q{i}"}
        verdict = await guard.before_call(agent="agent", session_id=session, call_id=f"c{i}",
                                          tool="search", arguments=args)
        assert isinstance(verdict, Allowed), verdict
        await guard.report(verdict.call, output=search.invoke(verdict.arguments))
    return lambda i: loop.run_until_complete(call(i))


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


def _floor(http: httpx.Client, url: str) -> Callable[[int], None]:
    """The tool call between two plain JSON round trips over loopback."""
    def call(i: int) -> None:
        args = {"query": f"q{i}"}
        asked = http.post(url, json={"call_id": f"c{i}", "tool": "search", "arguments": args})
        asked.raise_for_status()
        output = search.invoke(asked.json()["arguments"])
        http.post(url, json={"call": f"c{i}", "output": output}).raise_for_status()
    return call


def _cpu_s(pid: int) -> float:
    """A process's user + system CPU seconds so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _serve(config: Path, log: Path, src: Path | None = None,
           command: list[str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """A ``hookgate serve`` of ``src`` (default: this tree), or ``command`` + a port."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    source = src if src is not None else ROOT / "src"
    argv = [*command, str(port)] if command is not None else [
        sys.executable, "-m", "hookgate.cli.main", "serve", "--config", str(config),
        "--port", str(port), "--log-level", "warning"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(
                [str(source), str(ROOT), os.environ.get("PYTHONPATH", "")])})
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


def _local_child(config: Path, script: Path, src: Path) -> subprocess.Popen[str]:
    """An in-process guard of ``src`` in a process of its own, ready for calls."""
    proc = subprocess.Popen(
        [sys.executable, str(script), str(config)], cwd=ROOT, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(src), str(ROOT), os.environ.get("PYTHONPATH", "")])})
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit(f"the in-process guard of {src} did not start")
    return proc


def _in_child(proc: subprocess.Popen[str]) -> Callable[[int], float]:
    """One guarded call in the child; its duration as the child measured it."""
    def call(i: int) -> float:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(f"{i}\n")
        proc.stdin.flush()
        return float(proc.stdout.readline())
    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per path per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="three calls per path (for the tests)")
    parser.add_argument("--against", metavar="SRC", type=Path,
                        help="also a hookgate serve of this source tree (its src/ folder)")
    parser.add_argument("--in-blocks", action="store_true",
                        help="each round, run each path's calls one after another instead of "
                             "taking turns call by call")
    parser.add_argument("--postgres-url", metavar="URL",
                        help="a PostgreSQL server: each path on a database of its own there "
                             "instead of a SQLite file")
    opts = parser.parse_args()
    calls, rounds = (3, 1) if opts.quick else (opts.calls, opts.rounds)
    warm_ups = 1 if opts.quick else 5
    with tempfile.TemporaryDirectory(prefix="hookgate-bench-") as tmp, ExitStack() as dropped:
        work = Path(tmp)
        databases = Databases(work, opts.postgres_url, dropped)
        local_config = databases.config("in_process")
        served: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
        trees = {"loopback_http": None} | (
            {"loopback_http_against": opts.against.resolve()} if opts.against else {})
        floor_app = work / "floor_app.py"
        floor_app.write_text(FLOOR_APP)
        http = httpx.Client(timeout=30)
        clients: list[Client] = []
        local = None
        loop = asyncio.new_event_loop()
        async_config = databases.config("in_process_async")
        local_async = AsyncLocalGuard(async_config, framework="bench")
        children: dict[str, subprocess.Popen[str]] = {}
        try:
            floor_proc, floor_url = _serve(work / "floor.yaml", work / "floor.log",
                                           command=[sys.executable, str(floor_app)])
            served["two_http_round_trips"] = floor_proc, floor_url
            for name, src in trees.items():
                config = databases.config(name)
                served[name] = _serve(config, work / f"{name}.log", src)
            local = LocalGuard(local_config, framework="bench")
            paths: dict[str, Callable[[int], None]] = {
                "framework_tool_call": lambda i: search.invoke({"query": f"q{i}"}) and None,
                "two_http_round_trips": _floor(http, floor_url),
                "in_process": _guarded(local, f"s-{uuid.uuid4().hex}"),
                "in_process_async": _guarded_async(local_async, loop, f"s-{uuid.uuid4().hex}"),
            }
            for name in trees:
                clients.append(Client(served[name][1], TOKEN, framework="bench"))
                paths[name] = _guarded(clients[-1], f"s-{uuid.uuid4().hex}")
            if opts.against:
                # Each tree's in-process guard in a process of its own, so the two trees'
                # in-process costs (latency and CPU per call) compare within the run.
                child = work / "local_child.py"
                child.write_text(LOCAL_CHILD)
                for name, src in (("in_process_child", ROOT / "src"),
                                  ("in_process_child_against", opts.against.resolve())):
                    config = databases.config(name)
                    children[name] = _local_child(config, child, src)
            timed = {name: _in_child(proc) for name, proc in children.items()}
            samples: dict[str, list[float]] = {name: [] for name in (*paths, *timed)}
            for run in paths.values():  # warm-up: connections, statements, imports
                for i in range(warm_ups):
                    run(-1 - i)
            for measured in timed.values():
                for i in range(warm_ups):
                    measured(-1 - i)
            pids = {name: proc.pid for name, (proc, _) in served.items()} | {
                name: proc.pid for name, proc in children.items()}
            before = {name: _cpu_s(pid) for name, pid in pids.items()}
            backends = databases.backends_cpu()
            def one(name: str, n: int) -> None:
                if name in timed:
                    samples[name].append(timed[name](n))
                    return
                started = time.perf_counter()
                paths[name](n)
                samples[name].append(time.perf_counter() - started)

            names = [*paths, *timed]
            if opts.in_blocks:  # each round, each path's calls one after another
                for r in range(rounds):
                    for name in names:
                        for n in range(r * calls + 1, (r + 1) * calls + 1):
                            one(name, n)
            else:
                for n in range(1, rounds * calls + 1):  # one call of each path in turn
                    for name in names:
                        one(name, n)
            cpu = {name: _cpu_s(pid) - before[name] for name, pid in pids.items()}
            database_cpu = {name: tracked.spent_s() for name, tracked in backends.items()}
        finally:
            for proc in children.values():
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait(30)
            for client in clients:
                client.close()
            http.close()
            if local is not None:
                local.close()
            loop.run_until_complete(local_async.aclose())
            loop.close()
            for proc, _ in served.values():
                proc.terminate()
                proc.wait(30)
    bare = samples["framework_tool_call"]
    out: dict[str, Any] = {
        "benchmark": "guarded_calls",
        "calls_per_path": calls * rounds,
        "framework_tool_call": _figure(bare),
    }
    for name in samples:
        if name == "framework_tool_call":
            continue
        out[name] = _figure(samples[name], bare)
        if name in children:
            # The guard's whole process (the tool call included, as in its latency).
            out[name]["process_cpu_us_per_call"] = round(cpu[name] / (calls * rounds) * 1e6, 1)
        elif name in cpu:
            out[name]["server_cpu_us_per_call"] = round(cpu[name] / (calls * rounds) * 1e6, 1)
        if name in database_cpu:  # its database's backends, per call
            out[name]["postgresql_cpu_us_per_call"] = round(
                database_cpu[name] / (calls * rounds) * 1e6, 1)
    floor_added = max(out["two_http_round_trips"]["added_p50_us"], 1.0)
    out["added_p50_over_the_floor"] = {
        name: round(out[name]["added_p50_us"] / floor_added, 2)
        for name in ("in_process", *trees)}
    # What hookgate adds beyond the floor any guard in another process pays: its p50 and p99
    # less the floor's, and its server's CPU per call less the floor server's.
    floor = out["two_http_round_trips"]
    out["added_over_the_floor_us"] = {
        name: {"p50": round(out[name]["p50_us"] - floor["p50_us"], 1),
               "p99": round(out[name]["p99_us"] - floor["p99_us"], 1),
               **({"server_cpu_per_call": round(out[name]["server_cpu_us_per_call"]
                                                - floor["server_cpu_us_per_call"], 1)}
                  if name in cpu else {})}
        for name in trees}
    if opts.against:
        out["against"] = {"source": str(opts.against.resolve()),
                          "added_p50_today_over_against": round(
                              out["loopback_http"]["added_p50_us"]
                              / max(out["loopback_http_against"]["added_p50_us"], 1.0), 2),
                          "server_cpu_today_over_against": round(
                              out["loopback_http"]["server_cpu_us_per_call"]
                              / max(out["loopback_http_against"]["server_cpu_us_per_call"],
                                    1.0), 2),
                          "in_process_added_p50_today_over_against": round(
                              out["in_process_child"]["added_p50_us"]
                              / max(out["in_process_child_against"]["added_p50_us"], 1.0),
                              2),
                          "in_process_cpu_today_over_against": round(
                              out["in_process_child"]["process_cpu_us_per_call"]
                              / max(out["in_process_child_against"]["process_cpu_us_per_call"],
                                    1.0), 2)}
        if opts.postgres_url is not None:
            out["against"] |= {
                f"postgresql_cpu_today_over_against_{path}": round(
                    out[today]["postgresql_cpu_us_per_call"]
                    / max(out[f"{today}_against"]["postgresql_cpu_us_per_call"], 1.0), 2)
                for path, today in (("loopback", "loopback_http"),
                                    ("in_process", "in_process_child"))}
    out["targets"] = {
        "loopback_added_p50_within_1_ms": out["loopback_http"]["added_p50_us"] <= 1000,
        "loopback_p50_over_the_floor_within_1_ms":
            out["added_over_the_floor_us"]["loopback_http"]["p50"] <= 1000,
        "in_process_added_p50_within_0_3_ms": out["in_process"]["added_p50_us"] <= 300,
        "loopback_added_p99_within_3_ms": out["loopback_http"]["added_p99_us"] <= 3000,
    }
    out |= {"database": "sqlite" if opts.postgres_url is None else "postgresql",
            "hooks": ["audit_log", "readonly_guard"],
            "order": "in blocks" if opts.in_blocks else "call by call",
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                        "load_average": [round(x, 2) for x in os.getloadavg()]}}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
