"""The durable path side by side: hookgate, LangGraph with its PostgreSQL checkpointer, and
the floor, on one PostgreSQL cluster (each in a database of its own), interleaved per level.

One run is a scripted model making one tool call, then answering. Per concurrency level
(1, 8, 64) and system it reports runs/s and commits per run (the delta of
``pg_stat_database.xact_commit`` over the system's database divided by its runs; every
connection is closed before each reading, since a backend flushes its counters when it
exits and otherwise up to ten seconds late), with the ratios to LangGraph and to the floor:
  - hookgate: a real `hookgate serve`, runs over HTTP (POST /api/runs, its event stream to
    the end); statements and transactions per run as the server counts them; the server's
    CPU per run (``server_cpu_ms_per_run``) and PostgreSQL's (``postgresql_cpu_ms_per_run``:
    the CPU time of the backends serving its database, from /proc, when the cluster runs on
    this machine; the floor reports its own the same way);
  - LangGraph 1.2: a StateGraph (model node -> ToolNode -> model node) checkpointed by
    AsyncPostgresSaver, ``durability="sync"`` (each step durable before the next);
  - the floor: three single-row transactions per run (accepted, claimed, finished), what a
    durable exactly-once one-call run needs at least.
Then, one at a time and interleaved trial by trial: decision -> tool start on a parked run
(hookgate: a gated call approved over HTTP on the instance that runs it, and on another
instance of the same database; LangGraph: ``interrupt()`` resumed by ``Command(resume=...)``
behind the same HTTP contract (peers/langgraph_server.py, hookgate's server stack) and in
process), p50/p99; and the parking rate (runs reaching "waiting for approval" per second at
concurrency 8). SQLite: hookgate's runs/s against three fsync'd commits per run (WAL,
synchronous=FULL) on the same disk.

    python bench/durable_path.py [--postgres-url URL] [--levels 1,8,64] [--runs 200]
                                 [--decisions 50] [--quick] [--compare-src DIR]
                                 [--decisions-only] [--sqlite-only]

``--compare-src DIR`` adds a second hookgate, run from the sources in DIR (another tree's
``src``, e.g. the main branch's), in a database of its own and interleaved with the others
per level; the two hookgates' servers are up together and take each level in two slices,
A B then B A, so a load that changes meanwhile hits both alike: before and after a change,
measured in one run (on SQLite too: two files, the floor between the slices).
``--sqlite-only`` runs the SQLite part alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import httpx
import psycopg
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool as lc_tool
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.types import Command
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from peers.langgraph_server import one_tool_graph  # noqa: E402
from throughput import (  # noqa: E402
    TOKEN,
    Level,
    Server,
    free_port,
    pct,
    postgres_database,
    postgres_server,
    runs_at,
)

CONFIG = """\
database: {database}
orgs:
  - {{id: acme, name: ACME, read_only: false}}
users:
  - {{id: alice, org: acme, admin: true, token: {token}}}
tools:
  - hookgate.examples.purchasing:oa__list_vendors
  - crossinstance.tools:stamp
models:
  script:
    type: scripted
    turns:
      - tool_calls: [{{name: oa__list_vendors, args: {{}}}}]
      - answer: done
  gated:
    type: scripted
    turns:
      - tool_calls: [{{name: stamp, args: {{ref: r}}}}]
      - answer: stamped
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
  - {{id: clerk, org: acme, owner: alice, model: gated, instructions: Clerk.,
     tools: [stamp], confirmation_mode: inline_only}}
"""
H = {"Authorization": f"Bearer {TOKEN}"}


def summary(values_s: list[float]) -> dict[str, float | int]:
    return {"p50": round(statistics.median(values_s) * 1000, 2),
            "p99": round(pct(values_s, 99) * 1000, 2), "n": len(values_s)}


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


# -- commits -------------------------------------------------------------------------------


def commits(admin: str, database: str) -> int:
    """``xact_commit`` of ``database`` once it stops moving (exited backends flush theirs
    as they go; a reading is taken when two in a row, 0.1 s apart, agree)."""
    last = -1
    with psycopg.connect(admin, autocommit=True) as conn:
        for _ in range(100):
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s",
                               (database,)).fetchone()
            value = int(row[0]) if row else 0
            if value == last:
                return value
            last = value
            time.sleep(0.1)
    return last


# -- PostgreSQL's CPU ----------------------------------------------------------------------


class BackendCpu:
    """The CPU time PostgreSQL's backends serving one database have spent, read from
    ``/proc/PID/schedstat`` (nanoseconds on the CPU; the cluster must run on this machine).
    A thread polls the database's backends (``pg_stat_activity``) every 0.1 s, so a backend
    that comes and goes between two readings is counted up to its last one; the cluster's
    shared processes (WAL writer, checkpointer, autovacuum) are not counted. ``None`` when
    ``/proc`` does not show the backends (a remote server)."""

    def __init__(self, admin: str, database: str) -> None:
        self.admin, self.database = admin, database
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.readable = True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def _cpu_s(pid: int) -> float | None:
        try:
            with open(f"/proc/{pid}/schedstat") as f:
                return int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            return None

    def _poll(self, conn: psycopg.Connection[Any]) -> None:
        pids = [int(r[0]) for r in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.database,))]
        for pid in pids:
            value = self._cpu_s(pid)
            if value is None:
                self.readable = False
                continue
            self.last[pid] = value

    def start(self) -> None:
        """From now on (backends already there count from their current reading)."""
        with psycopg.connect(self.admin, autocommit=True) as conn:
            self._poll(conn)
        self.first = dict(self.last)

        def run() -> None:
            with psycopg.connect(self.admin, autocommit=True) as conn:
                while not self._stop.wait(0.1):
                    self._poll(conn)
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def spent_s(self) -> float:
        """CPU seconds since ``start`` (the reading taken now)."""
        with psycopg.connect(self.admin, autocommit=True) as conn:
            self._poll(conn)
        return sum(v - self.first.get(pid, 0.0) for pid, v in self.last.items())

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


@contextlib.contextmanager
def backend_cpu(admin: str, database: str) -> Iterator[BackendCpu]:
    cpu = BackendCpu(admin, database)
    cpu.start()
    try:
        yield cpu
    finally:
        cpu.stop()


# -- hookgate ------------------------------------------------------------------------------


def hookgate_env(stamps: Path, src: str | None = None) -> dict[str, str]:
    """The environment of `hookgate serve`; ``src``: the hookgate sources it runs from
    (first on its path), else this environment's."""
    return {**os.environ, "HOOKGATE_BENCH_STAMPS": str(stamps),
            "PYTHONPATH": os.pathsep.join(p for p in (
                src, str(BENCH), os.environ.get("PYTHONPATH")) if p)}


class Hookgate:
    """A hookgate database and the way to start `hookgate serve` on it."""

    def __init__(self, url: str, admin: str, database: str, workdir: Path,
                 src: str | None = None, start_stop: bool = True) -> None:
        """``start_stop``: a start migrates the database, then what a start and a stop
        commit is counted (else the first server migrates it, and none are counted)."""
        self.admin, self.database, self.workdir = admin, database, workdir
        self.stamps = workdir / f"stamps-{database}.txt"
        self.env = hookgate_env(self.stamps, src)
        self.config = workdir / f"hookgate-{uuid.uuid4().hex[:6]}.yaml"
        self.config.write_text(CONFIG.format(database=url, token=TOKEN))
        # What a start and a stop commit alone, taken off each level's count.
        self.start_stop_commits: int | None = None
        if start_stop:
            Server(self.config, workdir, self.env).stop()  # migrates
            before = commits(admin, database)
            Server(self.config, workdir, self.env).stop()
            self.start_stop_commits = commits(admin, database) - before

    def serve(self) -> Server:
        return Server(self.config, self.workdir, self.env)


def hookgate_levels(systems: list[Hookgate], concurrency: int, runs: int,
                    slices: int = 2) -> list[dict[str, Any]]:
    """Each hookgate (this tree's, the compared tree's) at one concurrency, their servers up
    together and driven in turns, slice by slice, the order reversed every other slice
    (A B, B A: a load that grows or falls during the level hits both alike). Each slice has
    its warm-up runs; CPU and SQL are of the timed runs, commits of all of them."""
    befores = [commits(h.admin, h.database) for h in systems]
    with contextlib.ExitStack() as stack:
        servers = []
        for h in systems:
            servers.append(h.serve())
            stack.callback(servers[-1].stop)
        cpus = [stack.enter_context(backend_cpu(h.admin, h.database)) for h in systems]
        levels = [Level(concurrency, cpu.spent_s if cpu.readable else None) for cpu in cpus]
        per_slice = max(runs // slices, concurrency)
        for piece in range(slices):
            order = list(range(len(systems)))
            for i in order[::-1] if piece % 2 else order:
                levels[i].drive([servers[i]], per_slice)
    out = []
    for h, level, before in zip(systems, levels, befores, strict=True):
        spent = commits(h.admin, h.database) - before - (h.start_stop_commits or 0)
        report = level.report()
        # The warm-up runs (one per client and slice) committed too.
        report["commits_per_run"] = round(spent / (level.runs + concurrency * slices), 2)
        out.append(report)
    return out


def stamped(stamps: Path) -> list[str]:
    """The tool's start times so far (a small local file, read between polls)."""
    return stamps.read_text().splitlines() if stamps.exists() else []


async def hookgate_park(client: httpx.AsyncClient, db: psycopg.AsyncConnection[Any]) -> str:
    """A new run parked at its gate (its request pending and no job of it queued or running:
    as LangGraph's run has returned at its interrupt); its request's id."""
    r = await client.post("/api/runs", json={"agent_id": "clerk", "message": "go"})
    run_id = r.raise_for_status().json()["run_id"]
    request_id = await _pending_request(client, run_id)
    await _parked(db, run_id)
    return request_id


async def decided(client: httpx.AsyncClient, request_id: str, stamps: Path) -> float:
    """Seconds from just before POST /respond (on ``client``'s server) to the tool's first
    line."""
    seen = len(stamped(stamps))
    t0 = time.time()
    r = await client.post(f"/api/confirmations/{request_id}/respond",
                          json={"decision": "approve"})
    r.raise_for_status()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lines = stamped(stamps)
        if len(lines) > seen:
            return float(lines[seen]) - t0
        # The tool writes its own start time, so how often this looks does not change the
        # figure; looking every half millisecond took CPU from the servers (two cores).
        await asyncio.sleep(0.01)
    raise RuntimeError(f"request {request_id} was approved but its tool never started")


async def decisions(a: str, b: str, peer: str, dsn: str, lg_dsn: str, stamps: Path,
                    peer_stamps: Path, trials: int,
                    compared: tuple[str, str, Path] | None = None) -> dict[str, list[float]]:
    """Decision -> tool start, interleaved trial by trial, one decision at a time:
      - ``hookgate``: POST /respond on instance A, which runs the parked call;
      - ``hookgate_other_instance``: the run parked on A, the decision posted to B;
      - ``langgraph_http``: POST /respond to LangGraph behind the same HTTP contract
        (peers/langgraph_server.py: the same server stack, ``Command(resume=True)``);
      - ``langgraph_in_process``: ``Command(resume=True)`` in this process;
      - ``compared`` (with ``compared``: its server's URL, database DSN and stamps): as
        ``hookgate``, on the hookgate run from --compare-src."""
    out: dict[str, list[float]] = {"hookgate": [], "hookgate_other_instance": [],
                                   "langgraph_http": [], "langgraph_in_process": []}
    started: list[float] = []
    async with (httpx.AsyncClient(base_url=a, headers=H, timeout=60) as on_a,
                httpx.AsyncClient(base_url=b, headers=H, timeout=60) as on_b,
                httpx.AsyncClient(base_url=peer, headers=H, timeout=60) as on_peer,
                await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db,
                langgraph_saver(lg_dsn, 2) as saver,
                contextlib.AsyncExitStack() as stack):
        graph = langgraph_graph(saver, gated=True, started=started)
        on_compared = None if compared is None else await stack.enter_async_context(
            httpx.AsyncClient(base_url=compared[0], headers=H, timeout=60))
        compared_db = None if compared is None else await stack.enter_async_context(
            await psycopg.AsyncConnection.connect(compared[1], autocommit=True))
        if compared is not None:
            out["compared"] = []
        async def compared_trial() -> None:
            if compared is not None and on_compared is not None and compared_db is not None:
                out["compared"].append(await decided(
                    on_compared, await hookgate_park(on_compared, compared_db), compared[2]))

        for trial in range(trials + 1):  # the first, a warm-up, is not counted
            # The two trees swap places every other trial: the one decided last in a trial
            # was found about 0.5 ms faster, whichever tree it was.
            if trial % 2:
                await compared_trial()
            out["hookgate"].append(await decided(on_a, await hookgate_park(on_a, db), stamps))
            out["hookgate_other_instance"].append(
                await decided(on_b, await hookgate_park(on_a, db), stamps))
            r = await on_peer.post("/api/runs", json={"agent_id": "clerk", "message": "go"})
            thread = r.raise_for_status().json()["request_id"]
            out["langgraph_http"].append(await decided(on_peer, thread, peer_stamps))
            out["langgraph_in_process"].append(await langgraph_resumed(graph, started))
            if not trial % 2:
                await compared_trial()
            if trial == 0:
                for values in out.values():
                    values.clear()
    return out


class LangGraphServer:
    """peers/langgraph_server.py in a subprocess (LangGraph behind hookgate's HTTP contract)."""

    def __init__(self, dsn: str, workdir: Path, stamps: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (workdir / f"langgraph-{self.port}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "peers.langgraph_server", "--port", str(self.port),
             "--dsn", dsn, "--stamps", str(stamps)], cwd=workdir, env=hookgate_env(stamps),
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the LangGraph server exited; see {self.log.name}")
            try:
                httpx.get(self.url + "/", timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.01)
        raise RuntimeError("the LangGraph server was not ready within 60 s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


async def _pending_request(client: httpx.AsyncClient, run_id: str) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        r = await client.get("/api/confirmations", params={"status": "pending", "limit": 50})
        for request in r.raise_for_status().json():
            if request.get("run_id") == run_id:
                return str(request["id"])
        await asyncio.sleep(0.005)
    raise RuntimeError(f"run {run_id} never asked for approval")


async def _parked(db: psycopg.AsyncConnection[Any], run_id: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        row = await (await db.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE lock = %s "
            "AND status IN ('todo', 'doing')", (run_id,))).fetchone()
        if row is not None and row[0] == 0:
            return
        await asyncio.sleep(0.005)
    raise RuntimeError(f"run {run_id} never parked")


async def hookgate_parking(url: str, runs: int, concurrency: int) -> float:
    """Runs per second reaching the approval gate (their ``confirmation_pending`` event)."""
    todo = iter(range(runs))

    async def client_loop(client: aiohttp.ClientSession) -> None:
        for _ in todo:
            async with client.post(url + "/api/runs",
                                   json={"agent_id": "clerk", "message": "go"}) as r:
                run_id = (await r.json())["run_id"]
            async with client.get(f"{url}/api/runs/{run_id}/events") as stream:
                async for line in stream.content:
                    if line.startswith(b"event: confirmation_pending"):
                        break
                else:
                    raise RuntimeError(f"run {run_id} ended without parking")

    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(aiohttp.ClientSession(
            headers=H, timeout=aiohttp.ClientTimeout(total=120))) for _ in range(concurrency)]
        started = time.perf_counter()
        await asyncio.gather(*(client_loop(c) for c in clients))
        return runs / (time.perf_counter() - started)


# -- LangGraph -----------------------------------------------------------------------------


def langgraph_graph(checkpointer: Any, gated: bool, started: list[float]) -> Any:
    """The one-tool graph of peers/langgraph_server.py; its tool notes when it started."""
    @lc_tool
    def list_vendors() -> str:
        """List the vendors."""
        started.append(time.time())
        return "acme, globex"

    return one_tool_graph(checkpointer, list_vendors, gated)


@contextlib.asynccontextmanager
async def langgraph_saver(dsn: str, size: int) -> Any:
    async with AsyncConnectionPool(dsn, min_size=size, max_size=size, open=False, kwargs={
            "autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}) as pool:
        await pool.wait()
        yield AsyncPostgresSaver(pool)  # type: ignore[arg-type]


def new_thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


async def langgraph_level(dsn: str, concurrency: int, runs: int) -> dict[str, Any]:
    async with langgraph_saver(dsn, concurrency) as saver:
        graph = langgraph_graph(saver, gated=False, started=[])
        latencies: list[float] = []

        async def one() -> None:
            t0 = time.perf_counter()
            out = await graph.ainvoke({"messages": [HumanMessage("go")]}, new_thread(),
                                      durability="sync")
            if out["messages"][-1].content != "done":
                raise RuntimeError(f"a LangGraph run ended {out['messages'][-1]!r}")
            latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(one() for _ in range(concurrency)))  # warm up
        latencies.clear()
        todo = iter(range(runs))

        async def worker() -> None:
            for _ in todo:
                await one()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
    return {"concurrency": concurrency, "runs": runs, "runs_per_s": round(runs / wall, 2),
            "latency_ms": {"p50": round(statistics.median(latencies) * 1000, 1),
                           "p99": round(pct(latencies, 99) * 1000, 1)},
            "counted_runs": runs + concurrency}


async def langgraph_resumed(graph: Any, started: list[float]) -> float:
    """One run parked at its interrupt, then resumed in process: seconds from just before
    ``Command(resume=True)`` to the tool's first line."""
    config = new_thread()
    parked = await graph.ainvoke({"messages": [HumanMessage("go")]}, config,
                                 durability="sync")
    if "__interrupt__" not in parked:
        raise RuntimeError("the LangGraph run did not stop at its interrupt")
    seen = len(started)
    t0 = time.time()
    await graph.ainvoke(Command(resume=True), config, durability="sync")
    if len(started) <= seen:
        raise RuntimeError("the resumed LangGraph run did not call its tool")
    return started[seen] - t0


async def langgraph_parking(dsn: str, runs: int, concurrency: int) -> float:
    async with langgraph_saver(dsn, concurrency) as saver:
        graph = langgraph_graph(saver, gated=True, started=[])
        todo = iter(range(runs))

        async def worker() -> None:
            for _ in todo:
                out = await graph.ainvoke({"messages": [HumanMessage("go")]}, new_thread(),
                                          durability="sync")
                if "__interrupt__" not in out:
                    raise RuntimeError("a LangGraph run did not park")

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return runs / (time.perf_counter() - started)


# -- the floor -----------------------------------------------------------------------------


async def floor_level(dsn: str, concurrency: int, runs: int,
                      cpu: tuple[str, str] | None = None) -> dict[str, Any]:
    """Three single-row commits per run: accepted, claimed, finished with its result.
    ``cpu``: (admin DSN, database) to report PostgreSQL's CPU per run."""
    pool = await asyncpg.create_pool(dsn, min_size=concurrency, max_size=concurrency)
    pg_cpu = None if cpu is None else BackendCpu(*cpu)
    try:
        if pg_cpu is not None:
            await asyncio.to_thread(pg_cpu.start)
        todo = iter(range(runs))

        async def worker() -> None:
            async with pool.acquire() as conn:
                for _ in todo:
                    run = uuid.uuid4().hex
                    await conn.execute("INSERT INTO floor_runs VALUES ($1, 'accepted', NULL)",
                                       run)
                    await conn.execute("UPDATE floor_runs SET status = 'claimed' "
                                       "WHERE id = $1 AND status = 'accepted'", run)
                    await conn.execute("UPDATE floor_runs SET status = 'completed', "
                                       "result = 'done' WHERE id = $1", run)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
        spent = (await asyncio.to_thread(pg_cpu.spent_s)
                 if pg_cpu is not None and pg_cpu.readable else None)
    finally:
        if pg_cpu is not None:
            pg_cpu.stop()
        await pool.close()
    return {"concurrency": concurrency, "runs": runs,
            "runs_per_s": round(runs / wall, 2) if runs else 0.0,
            "statements_per_run": 3,
            **({} if spent is None or not runs else {
                "postgresql_cpu_ms_per_run": round(spent / runs * 1000, 3)})}


def sqlite_floor(path: Path, runs: int) -> float:
    """Runs/s of three fsync'd single-row commits per run (WAL, synchronous=FULL)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE IF NOT EXISTS floor_runs "
                     "(id text PRIMARY KEY, status text NOT NULL, result text)")
        started = time.perf_counter()
        for _ in range(runs):
            run = uuid.uuid4().hex
            conn.execute("INSERT INTO floor_runs VALUES (?, 'accepted', NULL)", (run,))
            conn.execute("UPDATE floor_runs SET status = 'claimed' WHERE id = ?", (run,))
            conn.execute("UPDATE floor_runs SET status = 'completed', result = 'done' "
                         "WHERE id = ?", (run,))
        return runs / (time.perf_counter() - started)
    finally:
        conn.close()


# -- the whole bench -----------------------------------------------------------------------


@contextlib.contextmanager
def databases(server: str, names: list[str]) -> Iterator[dict[str, tuple[str, str, str]]]:
    with contextlib.ExitStack() as stack:
        yield {name: stack.enter_context(postgres_database(server)) for name in names}


def postgresql(server: str, workdir: Path, levels: list[int], runs: int,
               decision_trials: int,
               parked: int, compare_src: str | None = None,
               decisions_only: bool = False, quick: bool = False) -> dict[str, Any]:
    """``quick``: one slice per level, no start of its own to migrate nor start and stop
    counted apart (figures that only show the bench works)."""
    names = ["hookgate", "langgraph", "floor"] + (["compared"] if compare_src else [])
    with databases(server, names) as dbs:
        url, admin, hg_db = dbs["hookgate"]
        hookgate = Hookgate(url, admin, hg_db, workdir, start_stop=not quick)
        compared = None if compare_src is None else Hookgate(
            dbs["compared"][0], admin, dbs["compared"][2], workdir, compare_src,
            start_stop=not quick)
        lg_dsn = admin.rsplit("/", 1)[0] + "/" + dbs["langgraph"][2]
        floor_dsn = admin.rsplit("/", 1)[0] + "/" + dbs["floor"][2]

        async def lg_setup() -> None:
            async with langgraph_saver(lg_dsn, 1) as saver:
                await saver.setup()
        asyncio.run(lg_setup())

        async def floor_setup() -> None:
            conn = await asyncpg.connect(floor_dsn)
            await conn.execute("CREATE TABLE floor_runs "
                               "(id text PRIMARY KEY, status text NOT NULL, result text)")
            await conn.close()
        asyncio.run(floor_setup())
        # What opening and closing the floor's pool commits (asyncpg's own set-up).
        before = commits(admin, dbs["floor"][2])
        asyncio.run(floor_level(floor_dsn, 1, 0))
        floor_pool_commits = commits(admin, dbs["floor"][2]) - before

        out_levels = []
        for level in [] if decisions_only else levels:
            n = runs_at(level, runs)
            hg, *others = hookgate_levels(
                [hookgate] + ([] if compared is None else [compared]), level, n,
                slices=1 if quick else 2)
            other = others[0] if others else None
            before = commits(admin, dbs["langgraph"][2])
            lg = asyncio.run(langgraph_level(lg_dsn, level, n))
            lg["commits_per_run"] = round(
                (commits(admin, dbs["langgraph"][2]) - before) / lg.pop("counted_runs"), 2)
            before = commits(admin, dbs["floor"][2])
            fl = asyncio.run(floor_level(floor_dsn, level, n, (admin, dbs["floor"][2])))
            fl["commits_per_run"] = round(
                (commits(admin, dbs["floor"][2]) - before - floor_pool_commits) / n, 2)
            out_levels.append({
                "concurrency": level, "hookgate": hg, "langgraph": lg, "floor": fl,
                "hookgate_to_langgraph": ratio(hg["runs_per_s"], lg["runs_per_s"]),
                "hookgate_to_floor": ratio(hg["runs_per_s"], fl["runs_per_s"]),
                "langgraph_to_floor": ratio(lg["runs_per_s"], fl["runs_per_s"])})
            if other is not None:
                out_levels[-1].update({
                    "compared": other,
                    "compared_to_floor": ratio(other["runs_per_s"], fl["runs_per_s"])})

        server, other = hookgate.serve(), hookgate.serve()
        peer_stamps = workdir / "stamps-langgraph-http.txt"
        peer = LangGraphServer(lg_dsn, workdir, peer_stamps)
        third = None if compared is None else compared.serve()
        try:
            timed = asyncio.run(decisions(
                server.url, other.url, peer.url, admin.rsplit("/", 1)[0] + "/" + hg_db,
                lg_dsn, hookgate.stamps, peer_stamps, decision_trials,
                None if compared is None or third is None else (
                    third.url, admin.rsplit("/", 1)[0] + "/" + compared.database,
                    compared.stamps)))
            other.stop()
            if third is not None:
                third.stop()
            hg_parking = (0.0 if decisions_only
                          else asyncio.run(hookgate_parking(server.url, parked, 8)))
        finally:
            peer.stop()
            server.stop()
            other.stop()
            if third is not None:
                third.stop()
        lg_parking = 0.0 if decisions_only else asyncio.run(langgraph_parking(lg_dsn, parked, 8))
        figures = {name: summary(values) for name, values in timed.items()}
        return {
            "compared_src": compare_src,
            "levels": out_levels,
            "hookgate_start_stop_commits": hookgate.start_stop_commits,
            "decision_to_tool_start_ms": {
                **figures,
                # The measure: hookgate's p50 over LangGraph's behind the same HTTP
                # contract (at most 1 is the goal).
                "hookgate_to_langgraph_http_p50": ratio(
                    figures["hookgate"]["p50"], figures["langgraph_http"]["p50"]),
                "hookgate_to_langgraph_in_process_p50": ratio(
                    figures["hookgate"]["p50"], figures["langgraph_in_process"]["p50"]),
                "how": "a parked run, one decision at a time, the four interleaved trial by "
                       "trial; hookgate: POST /respond on the instance that parked the run "
                       "(hookgate) or on another instance of the same database "
                       "(hookgate_other_instance), to the tool's first line; LangGraph: the "
                       "same POST to a FastAPI app under hookgate's uvicorn config that "
                       "calls graph.ainvoke(Command(resume=True)) (langgraph_http), and "
                       "Command(resume=True) in process (langgraph_in_process)"},
            "parking_per_s": {"concurrency": 8, "hookgate": round(hg_parking, 2),
                              "langgraph": round(lg_parking, 2),
                              "hookgate_to_langgraph": ratio(hg_parking, lg_parking)},
        }


def sqlite(workdir: Path, levels: list[int], runs: int, compare_src: str | None = None,
           slices: int = 2) -> dict[str, Any]:
    """hookgate on a SQLite file against the fsync'd floor on the same disk, per level;
    with ``compare_src``, a second hookgate from those sources on a file of its own, the
    two servers up together and driven in turns (A B, then B A), the floor between them."""
    trees: list[tuple[str, str | None]] = [("hookgate", None)] + (
        [] if compare_src is None else [("compared", compare_src)])
    out = []
    with contextlib.ExitStack() as stack:
        servers = []
        for name, src in trees:
            config = workdir / f"{name}-sqlite.yaml"
            config.write_text(CONFIG.format(
                database=f"sqlite+aiosqlite:///{workdir / f'{name}.db'}", token=TOKEN))
            env = hookgate_env(workdir / f"stamps-sqlite-{name}.txt", src)
            servers.append(Server(config, workdir, env))
            stack.callback(servers[-1].stop)
        for level in levels:
            measured = [Level(level) for _ in servers]
            floors = []
            per_slice = max(runs_at(level, runs) // slices, level)
            for piece in range(slices):
                order = list(range(len(servers)))
                for i in order[::-1] if piece % 2 else order:
                    measured[i].drive([servers[i]], per_slice)
                floors.append(sqlite_floor(workdir / "floor.db", per_slice))
            floor = statistics.median(floors)
            row: dict[str, Any] = {"concurrency": level, "floor_runs_per_s": round(floor, 2)}
            for (name, _), level_of in zip(trees, measured, strict=True):
                hg = level_of.report()
                prefix = "hookgate" if name == "hookgate" else "compared"
                row.update({
                    f"{prefix}_runs_per_s": hg["runs_per_s"],
                    f"{prefix}_to_floor": ratio(hg["runs_per_s"], floor),
                    f"{prefix}_server_cpu_ms_per_run": hg["server_cpu_ms_per_run"],
                    f"{prefix}_latency_ms": hg["latency_ms"],
                    f"{prefix}_statements_per_run": hg["sql_statements_per_run"],
                    f"{prefix}_transactions_per_run": hg["transactions_per_run"]})
            out.append(row)
    return {"levels": out, "compared_src": compare_src,
            "floor": "three fsync'd commits per run, WAL, synchronous=FULL"}


def main(options: argparse.Namespace) -> dict[str, Any]:
    levels = [int(x) for x in options.levels.split(",")]
    workdir = Path(tempfile.mkdtemp(prefix="hookgate-durable-"))
    try:
        pg: dict[str, Any] = {"skipped": "--sqlite-only"}
        if not options.sqlite_only:
            with postgres_server(options.postgres_url, workdir) as server:
                pg = ({"skipped": "no PostgreSQL server or binaries"}
                      if server is None else postgresql(
                    server, workdir, levels, options.runs, options.decisions, options.parked,
                    options.compare_src, options.decisions_only, options.quick))
        lite = ({"skipped": "--decisions-only"} if options.decisions_only
                else sqlite(workdir, [lvl for lvl in levels if lvl <= 8], options.runs,
                            options.compare_src, slices=1 if options.quick else 2))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "benchmark": "durable_path",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "workload": "one run = scripted model, one tool call, then an answer",
        "postgresql": pg,
        "sqlite": lite,
        "targets": {"commits_per_run_max": 5, "floor_ratio_at_8_min": 0.25,
                    "sqlite_floor_ratio_min": 0.5, "decision_p99_ms_max": 50},
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres-url", default=os.environ.get("HOOKGATE_TEST_POSTGRES_URL"))
    parser.add_argument("--levels", default="1,8,64")
    parser.add_argument("--runs", type=int, default=200,
                        help="runs per level (at least 10 per client)")
    parser.add_argument("--decisions", type=int, default=50)
    parser.add_argument("--parked", type=int, default=200, help="runs parked at concurrency 8")
    parser.add_argument("--compare-src", default=None,
                        help="also run hookgate from these sources (another tree's src)")
    parser.add_argument("--decisions-only", action="store_true",
                        help="only decision -> tool start (no levels, parking or SQLite)")
    parser.add_argument("--sqlite-only", action="store_true",
                        help="only hookgate on SQLite against its fsync'd floor")
    parser.add_argument("--quick", action="store_true",
                        help="eight runs at concurrency 1, one decision, one parked run "
                             "(checks the bench works; not a measurement)")
    options = parser.parse_args()
    if options.quick:
        import throughput

        # Eight runs: the server's CPU is read in clock ticks (10 ms), a run takes ~5 ms.
        options.runs, options.levels, options.decisions, options.parked = 8, "1", 1, 1
        throughput.RUNS_PER_CLIENT = 1
    print(json.dumps(main(options), indent=2))
