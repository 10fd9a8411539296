"""Runs per second through a real `hookgate serve`, and how fast hookgate starts.

For each database (a SQLite file; a fresh PostgreSQL database when one is reachable) it
starts `hookgate serve` as a subprocess with one agent (scripted model: one call of a cheap
tool, then an answer; `audit_log` on) and drives runs over HTTP at concurrency 1, 8 and 64:
each client starts a run (POST /api/runs) and follows its event stream (SSE) to its end,
then checks the run completed. Per level it reports runs/s, guarded calls/s, run latency
p50/p99 (start to end of stream), the server's CPU per run (psutil) and the SQL per run (the
server counts statements and transactions when HOOKGATE_SQL_COUNT_FILE is set: every
transaction it begins, each single statement the raw driver paths send in autocommit included;
PostgreSQL's own pg_stat_database is not used: a busy backend publishes its counts up to
about ten seconds late).
Start-up: `import hookgate`, `import hookgate` plus every public name, `hookgate --help`,
and `hookgate serve` from exec to its first HTTP answer (medians).

    python bench/throughput.py [--runs 200] [--levels 1,8,64] [--backends sqlite,postgresql]
                               [--postgres-url URL] [--instances N] [--quick]

--instances N starts N `hookgate serve` processes on one PostgreSQL database and spreads
the clients over them (a run advances wherever its job is fetched; CPU and SQL are summed
over the instances).

PostgreSQL: --postgres-url or HOOKGATE_TEST_POSTGRES_URL names a server (a database is
created and dropped for the bench); without one a throwaway cluster is started with
scripts/pgcluster.py when PostgreSQL's binaries exist, else the backend is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import aiohttp
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
SERVER_DEPENDENCIES = ("import fastapi, sqlalchemy.ext.asyncio, sqlalchemy.orm, uvicorn, "
                       "pydantic, yaml, httpx")
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


def run_timed(cmd: list[str], env: dict[str, str]) -> float:
    """Wall time of running ``cmd`` to its end."""
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env)
    return time.perf_counter() - started


def startup_times(envs: dict[str, dict[str, str]], repeats: int) -> dict[str, dict[str, float]]:
    """Median import and --help times per source tree, the trees taking turns."""
    cmd = hookgate_command()
    commands = {
        "import_hookgate_s": [sys.executable, "-c", "import hookgate"],
        "import_public_names_s": [sys.executable, "-c", "from hookgate import *"],
        "help_s": [*cmd, "--help"],
        # What `hookgate serve` cannot start without, whatever hookgate does: the floor
        # under serve_ready_s on this machine.
        "import_server_dependencies_s": [sys.executable, "-c", SERVER_DEPENDENCIES],
    }
    times: dict[str, dict[str, list[float]]] = {name: {k: [] for k in commands} for name in envs}
    for _ in range(repeats):
        for key, command in commands.items():
            for name, env in envs.items():
                times[name][key].append(run_timed(command, env))
    return {name: {k: round(statistics.median(v), 3) for k, v in per.items()}
            for name, per in times.items()}


class Server:
    """`hookgate serve` in a subprocess, with its ready time and a SQL count file."""

    def __init__(self, config: Path, workdir: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.count_file = workdir / f"sql-{self.port}.json"
        env = {**env, "HOOKGATE_SQL_COUNT_FILE": str(self.count_file)}
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


async def one_run(client: aiohttp.ClientSession, url: str) -> float:
    """Start a run, follow its events to the end; seconds from start to end."""
    started = time.perf_counter()
    async with client.post(url + "/api/runs", json={"agent_id": "bench", "message": "go"}) as r:
        r.raise_for_status()
        run_id = (await r.json())["run_id"]
    async with client.get(f"{url}/api/runs/{run_id}/events") as stream:
        stream.raise_for_status()
        # The stream ends with the run: read it whole, then pick the event names out (a
        # Python loop over its lines cost the client, which shares the server's two
        # cores, more CPU than the server spent writing them).
        body = await stream.read()
    elapsed = time.perf_counter() - started
    kinds = [line[6:].strip().decode() for line in body.splitlines()
             if line.startswith(b"event:")]
    if "tool_result" not in kinds and "tool_call" not in kinds:
        raise RuntimeError(f"run {run_id} made no tool call: {kinds}")
    async with client.get(f"{url}/api/runs/{run_id}") as r:
        status = (await r.json())["status"]
    if status != "completed":
        raise RuntimeError(f"run {run_id} ended {status}: {kinds}")
    return elapsed


async def drive(urls: list[str], runs: int, concurrency: int,
                warmed_up: Callable[[], None] | None = None) -> tuple[list[float], float]:
    """``runs`` runs by ``concurrency`` clients; their latencies and the wall time. Client
    ``i`` talks to ``urls[i % len(urls)]`` (several instances: the clients are spread over
    them, and a run may advance on any of them, wherever its job is fetched).

    The client shares the machine's cores with the server and PostgreSQL, so its own CPU
    is kept small: aiohttp (C-accelerated HTTP parsing) spends ~3 ms of CPU per run where
    httpx spent ~8 ms, which on 2 cores took a fifth of the machine from the server. Each
    client has its own connections (two: the event stream and the requests beside it)."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    timeout = aiohttp.ClientTimeout(total=120)
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(aiohttp.ClientSession(
            headers=headers, timeout=timeout,
            # Under uvicorn's 5 s keep-alive: a connection left idle longer (e.g. while
            # the warm-up's slowest run ends) is closed here, not reused as the server
            # closes it (a "Server disconnected" race).
            connector=aiohttp.TCPConnector(limit=2, keepalive_timeout=2.0)))
            for _ in range(concurrency)]
        url_of = {id(c): urls[i % len(urls)] for i, c in enumerate(clients)}
        await asyncio.gather(*(one_run(c, url_of[id(c)]) for c in clients))  # warm up
        if warmed_up is not None:
            await asyncio.to_thread(warmed_up)
        todo = iter(range(runs))
        latencies: list[float] = []

        async def worker(client: aiohttp.ClientSession) -> None:
            for _ in todo:
                latencies.append(await one_run(client, url_of[id(client)]))

        started = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in clients))
        return latencies, time.perf_counter() - started


class Level:
    """What one server did at one concurrency, summed over the slices it was driven."""

    def __init__(self, concurrency: int,
                 database_cpu_s: Callable[[], float] | None = None) -> None:
        """``database_cpu_s``: the CPU seconds the database's processes serving the servers
        have spent so far (reported per run as ``postgresql_cpu_ms_per_run``)."""
        self.concurrency = concurrency
        self.database_cpu_s = database_cpu_s
        self.latencies: list[float] = []
        self.wall = self.cpu = self.database_cpu = 0.0
        self.runs = self.statements = self.transactions = 0

    def drive(self, servers: list[Server], runs: int) -> None:
        start: dict[str, Any] = {}

        def totals() -> tuple[float, dict[str, int]]:
            counts = [s.sql() for s in servers]
            start["db_cpu"] = (None if self.database_cpu_s is None
                               else self.database_cpu_s())
            return (sum(s.cpu_s() for s in servers),
                    {k: sum(c[k] for c in counts) for k in ("statements", "transactions")})

        def warmed_up() -> None:
            # Taken after each client's warm-up run: CPU, SQL and transactions per run
            # are of the timed runs alone (not of `concurrency` more, nor of opening the
            # clients' connections).
            start["cpu"], start["sql"] = totals()
            start["db_cpu0"] = start["db_cpu"]

        latencies, wall = asyncio.run(drive([s.url for s in servers], runs,
                                            self.concurrency, warmed_up=warmed_up))
        cpu1, sql1 = totals()
        cpu0, sql0 = start["cpu"], start["sql"]
        self.latencies += latencies
        self.wall += wall
        self.cpu += cpu1 - cpu0
        if start["db_cpu"] is not None:
            self.database_cpu += start["db_cpu"] - start["db_cpu0"]
        self.runs += len(latencies)
        self.statements += sql1["statements"] - sql0["statements"]
        self.transactions += sql1["transactions"] - sql0["transactions"]

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "concurrency": self.concurrency,
            "runs": len(self.latencies),
            "runs_per_s": round(len(self.latencies) / self.wall, 2),
            "guarded_calls_per_s": round(len(self.latencies) / self.wall, 2),  # one per run
            "latency_ms": {"p50": round(statistics.median(self.latencies) * 1000, 1),
                           "p99": round(pct(self.latencies, 99) * 1000, 1)},
            "server_cpu_ms_per_run": round(self.cpu / self.runs * 1000, 2),
            **({} if self.database_cpu_s is None else {"postgresql_cpu_ms_per_run": round(
                self.database_cpu / self.runs * 1000, 3)}),
            "sql_statements_per_run": round(self.statements / self.runs, 1),
            # Every transaction the server began: SQLAlchemy's, the raw driver paths' (each of
            # their single statements in autocommit is one).
            "transactions_per_run": round(self.transactions / self.runs, 1),
        }
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
def postgres_database(server: str) -> Iterator[tuple[str, str, str]]:
    """(SQLAlchemy URL, admin DSN, database name) of a fresh database on ``server``,
    dropped afterwards."""
    database = pgcluster.create_database(server, "bench_")
    try:
        yield (database, server.replace("postgresql+asyncpg://", "postgresql://"),
               database.rpartition("/")[2])
    finally:
        pgcluster.drop_database(server, database)


#: Runs per client at least, per level: a level's rate is its runs over its wall time, which
#: ends with the last runs draining (fewer than ``concurrency`` in flight); with too few
#: runs per client that tail, one run's latency long, is a large part of the wall time.
RUNS_PER_CLIENT = 10


def runs_at(level: int, runs: int) -> int:
    """The runs measured at concurrency ``level`` (``--runs``, or more at high levels)."""
    return max(runs, RUNS_PER_CLIENT * level)


def measure_backend(databases: dict[str, tuple[str, tuple[str, str] | None]],
                    envs: dict[str, dict[str, str]], workdir: Path, runs: int,
                    levels: list[int], slices: int, instances: int = 1,
                    migrate_apart: bool = True) -> dict[str, dict[str, Any]]:
    """Each tree's server (``instances`` of them, on one database) on its own database,
    driven in turns: every level is cut into ``slices`` and the trees take the slices
    alternately, so machine load hits them alike. ``migrate_apart``: a start of its own
    migrates the database first (else the first instance does, its ready time with it)."""
    servers: dict[str, list[Server]] = {}
    try:
        for name, env in envs.items():
            config = workdir / f"hookgate-{uuid.uuid4().hex[:6]}.yaml"
            config.write_text(CONFIG.format(database=databases[name][0], token=TOKEN))
            if migrate_apart:
                # The first start migrates the database; the ready time is a second start's.
                Server(config, workdir, env).stop()
            servers[name] = []
            for _ in range(instances):
                servers[name].append(Server(config, workdir, env))
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in envs}
        for level in levels:
            measured = {name: Level(level) for name in envs}
            per_slice = runs_at(level, runs) // slices
            for _ in range(slices):
                for name, group in servers.items():
                    measured[name].drive(group, max(per_slice, level))
            for name in envs:
                results[name].append(measured[name].report())
    finally:
        for group in servers.values():
            for server in group:
                server.stop()
    return {name: {"serve_ready_s": servers[name][0].ready_s, "instances": instances,
                   "levels": results[name]} for name in envs}


def main(options: argparse.Namespace) -> dict[str, Any]:
    envs = {"this": dict(os.environ)}
    if options.against:
        envs["against"] = {**os.environ, "PYTHONPATH": str(Path(options.against).resolve())}
    startup = startup_times(envs, 1 if options.quick else 5)
    levels = [int(x) for x in options.levels.split(",")]
    slices = 1 if options.quick else options.slices
    backends: dict[str, dict[str, Any]] = {name: {} for name in envs}
    workdir = Path(tempfile.mkdtemp(prefix="hookgate-throughput-"))
    try:
        for backend in options.backends.split(","):
            if backend == "sqlite":
                dbs: dict[str, tuple[str, tuple[str, str] | None]] = {
                    name: (f"sqlite+aiosqlite:///{workdir / f'bench-{name}.db'}", None)
                    for name in envs}
                for name, result in measure_backend(dbs, envs, workdir, options.runs,
                                                    levels, slices,
                                                    migrate_apart=not options.quick).items():
                    backends[name]["sqlite"] = result
            elif backend == "postgresql":
                with postgres_server(options.postgres_url, workdir) as server:
                    if server is None:
                        for name in envs:
                            backends[name]["postgresql"] = {
                                "skipped": "no PostgreSQL server or binaries"}
                        continue
                    with ExitStack() as stack:
                        dbs = {}
                        for name in envs:
                            url, admin, db_name = stack.enter_context(
                                postgres_database(server))
                            dbs[name] = (url, (admin, db_name))
                        for name, result in measure_backend(
                                dbs, envs, workdir, options.runs, levels, slices,
                                instances=options.instances,
                                migrate_apart=not options.quick).items():
                            backends[name]["postgresql"] = result
            else:
                raise SystemExit(f"unknown backend {backend!r}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report: dict[str, dict[str, Any]] = {}
    for name in envs:
        ready = [b["serve_ready_s"] for b in backends[name].values() if "serve_ready_s" in b]
        report[name] = {"startup": {**startup[name],
                                    "serve_ready_s": min(ready) if ready else None},
                        "backends": backends[name]}
    out: dict[str, Any] = {
        "benchmark": "throughput",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "workload": "one run = scripted model, one call of a cheap tool, audit_log on",
        **report["this"],
        "targets": TARGETS,
    }
    if options.against:
        out["against"] = {"source": str(Path(options.against).resolve()), **report["against"]}
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per concurrency level (at least RUNS_PER_CLIENT per client)")
    parser.add_argument("--levels", default="1,8,64")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--postgres-url", default=os.environ.get("HOOKGATE_TEST_POSTGRES_URL"))
    parser.add_argument("--slices", type=int, default=3,
                        help="turns per level when comparing (--against)")
    parser.add_argument("--against", metavar="SRC",
                        help="another source tree (its src/ directory) to measure in turns "
                             "with this one, e.g. an export of the main branch")
    parser.add_argument("--instances", type=int, default=1,
                        help="PostgreSQL: this many `hookgate serve` processes on one database, "
                             "the clients spread over them (SQLite is served by one)")
    parser.add_argument("--quick", action="store_true",
                        help="a few runs at concurrency 1 and 8, start-up timed once and "
                             "serve_ready_s with the migration in it (checks the bench "
                             "works; not a measurement)")
    options = parser.parse_args()
    if options.quick:
        options.runs, options.levels = 8, "1,8"
        RUNS_PER_CLIENT = 1
    print(json.dumps(main(options), indent=2))
