"""Runs per second through a real `hookgate serve`, and how fast hookgate starts.

For each database (a SQLite file; a fresh PostgreSQL database when one is reachable) it
starts `hookgate serve` as a subprocess with one agent (scripted model: one call of a cheap
tool, then an answer; `audit_log` on) and drives runs over HTTP at concurrency 1, 8 and 64:
each client starts a run (POST /api/runs) and follows its event stream (SSE) to its end,
then checks the run completed. Per level it reports runs/s, guarded calls/s, run latency
p50/p99 (start to end of stream), the server's CPU per run (psutil) and the SQL per run (the
server counts statements and transactions when HOOKGATE_SQL_COUNT_FILE is set; on
PostgreSQL also the transactions the server saw, from pg_stat_database).
Start-up: `import hookgate`, `import hookgate` plus every public name, `hookgate --help`,
and `hookgate serve` from exec to its first HTTP answer (medians).

    python bench/throughput.py [--runs 200] [--levels 1,8,64] [--backends sqlite,postgresql]
                               [--postgres-url URL] [--quick]

PostgreSQL: --postgres-url or HOOKGATE_TEST_POSTGRES_URL names a server (a database is
created and dropped for the bench); without one a throwaway cluster is started with
scripts/pgcluster.py when PostgreSQL's binaries exist, else the backend is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import pgcluster  # noqa: E402

TOKEN = "bench-token-alice"
CONFIG = """\
database: {database}
orgs:
  - {{id: acme, name: ACME, read_only: false}}
users:
  - {{id: alice, org: acme, admin: true, token: {token}}}
tools:
  - hookgate.examples.purchasing:oa__list_vendors
models:
  script:
    type: scripted
    turns:
      - tool_calls: [{{name: oa__list_vendors, args: {{}}}}]
      - answer: done
agents:
  - id: bench
    org: acme
    owner: alice
    model: script
    instructions: Benchmark agent.
    tools: [oa__list_vendors]
    model_config_json:
      hooks:
        class_hooks: [audit_log]
"""
TARGETS = {"import_hookgate_s": 0.3, "help_s": 0.5, "serve_ready_s": 1.0}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def hookgate_command() -> list[str]:
    """The installed console script when it is this interpreter's, else ``-m``."""
    script = Path(sys.executable).with_name("hookgate")
    return [str(script)] if script.exists() else [sys.executable, "-m", "hookgate.cli.main"]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


# -- start-up ------------------------------------------------------------------------------


def timed(cmd: list[str], repeats: int) -> float:
    """Median wall time of running ``cmd`` to its end."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 3)


class Server:
    """`hookgate serve` in a subprocess, with its ready time and a SQL count file."""

    def __init__(self, config: Path, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.count_file = workdir / f"sql-{self.port}.json"
        env = {**os.environ, "HOOKGATE_SQL_COUNT_FILE": str(self.count_file)}
        self.log = (workdir / f"serve-{self.port}.log").open("wb")
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            [*hookgate_command(), "serve", "--config", str(config), "--port", str(self.port),
             "--log-level", "warning"], cwd=workdir, env=env, stdout=self.log,
            stderr=subprocess.STDOUT)
        self.ready_s = self._wait_ready(started)
        self.process = psutil.Process(self.proc.pid)

    def _wait_ready(self, started: float) -> float:
        deadline = started + 60
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hookgate serve exited with {self.proc.returncode}; "
                                   f"see {self.log.name}")
            try:
                httpx.get(self.url + "/", timeout=1)
                return round(time.perf_counter() - started, 3)
            except httpx.TransportError:
                time.sleep(0.005)
        raise RuntimeError("hookgate serve was not ready within 60 s")

    def cpu_s(self) -> float:
        t = self.process.cpu_times()
        return float(t.user + t.system)

    def sql(self) -> dict[str, int]:
        """The server's counts, as of a write made after this call began."""
        asked = time.time()
        deadline = asked + 5
        while time.time() < deadline:
            try:
                counts = json.loads(self.count_file.read_text())
            except (FileNotFoundError, json.JSONDecodeError):
                counts = {"at": 0}
            if counts["at"] > asked:
                return {"statements": counts["statements"],
                        "transactions": counts["transactions"]}
            time.sleep(0.05)
        raise RuntimeError("the server did not report its SQL counts "
                           "(HOOKGATE_SQL_COUNT_FILE)")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


# -- driving runs --------------------------------------------------------------------------


async def one_run(client: httpx.AsyncClient) -> float:
    """Start a run, follow its events to the end; seconds from start to end."""
    started = time.perf_counter()
    r = await client.post("/api/runs", json={"agent_id": "bench", "message": "go"})
    r.raise_for_status()
    run_id = r.json()["run_id"]
    kinds = []
    async with client.stream("GET", f"/api/runs/{run_id}/events") as stream:
        stream.raise_for_status()
        async for line in stream.aiter_lines():
            if line.startswith("event:"):
                kinds.append(line[6:].strip())
    elapsed = time.perf_counter() - started
    if "tool_result" not in kinds and "tool_call" not in kinds:
        raise RuntimeError(f"run {run_id} made no tool call: {kinds}")
    status = (await client.get(f"/api/runs/{run_id}")).json()["status"]
    if status != "completed":
        raise RuntimeError(f"run {run_id} ended {status}: {kinds}")
    return elapsed


async def drive(url: str, runs: int, concurrency: int) -> tuple[list[float], float]:
    """``runs`` runs by ``concurrency`` clients; their latencies and the wall time."""
    limits = httpx.Limits(max_connections=concurrency * 2,
                          max_keepalive_connections=concurrency * 2)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits,
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        await one_run(client)  # warm: first-use costs are not throughput
        todo = iter(range(runs))
        latencies: list[float] = []

        async def worker() -> None:
            for _ in todo:
                latencies.append(await one_run(client))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return latencies, time.perf_counter() - started


def pg_transactions(admin_dsn: str, database: str) -> int:
    import asyncpg  # type: ignore[import-untyped]

    async def read() -> int:
        conn = await asyncpg.connect(admin_dsn)
        try:
            # Statistics are flushed at transaction end or within a second; force it.
            row = await conn.fetchrow(
                "SELECT xact_commit + xact_rollback AS n FROM pg_stat_database "
                "WHERE datname = $1", database)
            return int(row["n"])
        finally:
            await conn.close()

    return asyncio.run(read())


def settle() -> None:
    """Wait for PostgreSQL to publish the server's connections' statistics (an idle backend
    flushes them within about a second)."""
    time.sleep(1.5)


def measure_level(server: Server, runs: int, concurrency: int,
                  pg: tuple[str, str] | None) -> dict[str, Any]:
    cpu0, sql0 = server.cpu_s(), server.sql()
    pg0 = pg_transactions(*pg) if pg else 0  # after the previous level's settle time
    latencies, wall = asyncio.run(drive(server.url, runs, concurrency))
    cpu1, sql1 = server.cpu_s(), server.sql()
    done = len(latencies) + 1  # the warm-up run is counted by the server too
    out: dict[str, Any] = {
        "concurrency": concurrency,
        "runs": len(latencies),
        "runs_per_s": round(len(latencies) / wall, 2),
        "guarded_calls_per_s": round(len(latencies) / wall, 2),  # one tool call per run
        "latency_ms": {"p50": round(statistics.median(latencies) * 1000, 1),
                       "p99": round(pct(latencies, 99) * 1000, 1)},
        "server_cpu_ms_per_run": round((cpu1 - cpu0) / done * 1000, 2),
        "sql_statements_per_run": round((sql1["statements"] - sql0["statements"]) / done, 1),
        "sqlalchemy_transactions_per_run": round(
            (sql1["transactions"] - sql0["transactions"]) / done, 1),
    }
    if pg:
        settle()
        out["pg_transactions_per_run"] = round((pg_transactions(*pg) - pg0) / done, 1)
    return out


# -- databases -----------------------------------------------------------------------------


@contextmanager
def postgres_server(url: str | None, workdir: Path) -> Iterator[str | None]:
    """``url``, or a throwaway cluster's URL when none is given (None: no PostgreSQL)."""
    if url is not None:
        yield url
        return
    if pgcluster.find_bindir() is None:
        yield None
        return
    cluster = workdir / "pg"
    cluster.mkdir()
    os.chmod(workdir, 0o755)
    os.chmod(cluster, 0o755)
    try:
        yield pgcluster.start(cluster)
    finally:
        pgcluster.stop(cluster)


@contextmanager
def postgres_database(url: str | None, workdir: Path) -> Iterator[tuple[str, str, str] | None]:
    """(SQLAlchemy URL, admin DSN, database name) of a fresh database, dropped afterwards."""
    with postgres_server(url, workdir) as server:
        if server is None:
            yield None
            return
        database = pgcluster.create_database(server, "bench_")
        try:
            yield (database, server.replace("postgresql+asyncpg://", "postgresql://"),
                   database.rpartition("/")[2])
        finally:
            pgcluster.drop_database(server, database)


def measure_backend(database_url: str, workdir: Path, runs: int, levels: list[int],
                    pg: tuple[str, str] | None) -> dict[str, Any]:
    config = workdir / f"hookgate-{uuid.uuid4().hex[:6]}.yaml"
    config.write_text(CONFIG.format(database=database_url, token=TOKEN))
    # The first start migrates the database; the ready time is taken on a second start.
    Server(config, workdir).stop()
    server = Server(config, workdir)
    try:
        if pg:
            settle()
        results = [measure_level(server, max(runs, level), level, pg) for level in levels]
    finally:
        server.stop()
    return {"serve_ready_s": server.ready_s, "levels": results}


def main(options: argparse.Namespace) -> dict[str, Any]:
    repeats = 1 if options.quick else 5
    cmd = hookgate_command()
    startup = {
        "import_hookgate_s": timed([sys.executable, "-c", "import hookgate"], repeats),
        "import_public_names_s": timed(
            [sys.executable, "-c", "from hookgate import *"], repeats),
        "help_s": timed([*cmd, "--help"], repeats),
    }
    levels = [int(x) for x in options.levels.split(",")]
    backends: dict[str, Any] = {}
    workdir = Path(tempfile.mkdtemp(prefix="hookgate-throughput-"))
    try:
        for backend in options.backends.split(","):
            if backend == "sqlite":
                backends["sqlite"] = measure_backend(
                    f"sqlite+aiosqlite:///{workdir / 'bench.db'}", workdir, options.runs,
                    levels, None)
            elif backend == "postgresql":
                with postgres_database(options.postgres_url, workdir) as pg:
                    if pg is None:
                        backends["postgresql"] = {"skipped": "no PostgreSQL server or binaries"}
                        continue
                    backends["postgresql"] = measure_backend(
                        pg[0], workdir, options.runs, levels, (pg[1], pg[2]))
            else:
                raise SystemExit(f"unknown backend {backend!r}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    ready = [b["serve_ready_s"] for b in backends.values() if "serve_ready_s" in b]
    startup["serve_ready_s"] = min(ready) if ready else None
    return {
        "benchmark": "throughput",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "workload": "one run = scripted model, one call of a cheap tool, audit_log on",
        "startup": startup,
        "backends": backends,
        "targets": TARGETS,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per concurrency level")
    parser.add_argument("--levels", default="1,8,64")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--postgres-url", default=os.environ.get("HOOKGATE_TEST_POSTGRES_URL"))
    parser.add_argument("--quick", action="store_true",
                        help="a few runs at concurrency 1 and 8 (checks the bench works)")
    options = parser.parse_args()
    if options.quick:
        options.runs, options.levels = 8, "1,8"
    print(json.dumps(main(options), indent=2))
