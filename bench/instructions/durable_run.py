"""Instructions per durable one-call run of `hookgate serve` on PostgreSQL or SQLite (callgrind).

The bench's agent (durable_path.py: one call of a cheap tool with ``audit_log``, then an
answer) in a database of its own on the cluster of ``--postgres-url`` (with ``--sqlite``:
in a SQLite file of its own, WAL, as `hookgate serve` sets it up); `hookgate serve`
from ``--src`` (a tree's ``src``) under ``valgrind --tool=callgrind --instr-atstart=no``,
instrumentation on (``callgrind_control -i on``) only over the measured runs, after ten
warm-up runs, one run at a time. Instruction counts do not depend on the machine's load,
unlike CPU time: run it once per tree and compare.

``--decisions`` (PostgreSQL) measures a decision instead: runs of the gated agent
(durable_path.py's ``clerk``) are parked at their gate first, uncounted; then each is
approved over HTTP (``POST /api/confirmations/{id}/respond``) and its continuation awaited
to the run's end (its job gone), one at a time, ten of them as warm-up.

    python bench/instructions/durable_run.py --src /tmp/base/src [--runs 60]
                                             [--postgres-url URL | --sqlite] [--decisions]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg

BENCH = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH))

import durable_path  # noqa: E402
import throughput  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _callgrind  # noqa: E402


@contextlib.contextmanager
def _served(work: Path, server: str | None, src: str
            ) -> Iterator[tuple[Path, dict[str, str]]]:
    """The configuration and environment of the measured server (from ``src``): a
    database of its own on ``server``'s cluster, or with ``server`` None a SQLite file."""
    if server is None:
        config = work / "hookgate-sqlite.yaml"
        config.write_text(durable_path.CONFIG.format(
            database=f"sqlite+aiosqlite:///{work / 'hookgate.db'}", token=throughput.TOKEN))
        yield config, durable_path.hookgate_env(work / "stamps.txt", src)
        return
    with throughput.postgres_database(server) as (url, admin, name):
        hookgate = durable_path.Hookgate(url, admin, name, work, src=src, start_stop=True)
        yield hookgate.config, hookgate.env


async def _park(base: str, dsn: str, n: int) -> list[tuple[str, str]]:
    """``n`` runs of the gated agent parked at their gate: each run's id and request's."""
    async with (httpx.AsyncClient(base_url=base, headers=durable_path.H, timeout=600) as c,
                await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db):
        parked = []
        for _ in range(n):
            r = await c.post("/api/runs", json={"agent_id": "clerk", "message": "go"})
            run_id = r.raise_for_status().json()["run_id"]
            request_id = await durable_path._pending_request(c, run_id)
            await durable_path._parked(db, run_id)
            parked.append((run_id, request_id))
        return parked


async def _decide(base: str, dsn: str, parked: list[tuple[str, str]]) -> None:
    """Each parked run's request approved, and its continuation awaited to its job's end."""
    async with (httpx.AsyncClient(base_url=base, headers=durable_path.H, timeout=600) as c,
                await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db):
        for run_id, request_id in parked:
            r = await c.post(f"/api/confirmations/{request_id}/respond",
                             json={"decision": "approve"})
            r.raise_for_status()
            await durable_path._parked(db, run_id)  # no job of the run left: it ended


def instructions(src: str, runs: int, server: str | None, decisions: bool = False) -> int:
    """Instructions (callgrind's Ir) of `hookgate serve` from ``src`` over ``runs`` runs and
    the one warm-up run `throughput.drive` makes first; on SQLite with ``server`` None.
    ``decisions``: over ``runs`` decisions on parked runs, each to its run's end."""
    work = Path(tempfile.mkdtemp(prefix="cg-durable-"))
    out = str(work / "callgrind.out")
    with _served(work, server, src) as (config, env):
        port = throughput.free_port()
        base = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen(
            _callgrind.command(out, *throughput.hookgate_command(), "serve", "--config",
                               str(config), "--port", str(port),
                               "--log-level", "warning"),
            cwd=work, env=env, stdout=(work / "log").open("wb"),
            stderr=subprocess.STDOUT)
        try:
            _callgrind.wait_for(base, proc, work / "log")
            if decisions:
                assert server is not None, "decisions park their runs on PostgreSQL"
                dsn = _dsn(config)
                parked = asyncio.run(_park(base, dsn, 10 + runs))
                asyncio.run(_decide(base, dsn, parked[:10]))
                _callgrind.control(proc.pid, "-z")
                _callgrind.control(proc.pid, "-i", "on")
                asyncio.run(_decide(base, dsn, parked[10:]))
            else:
                asyncio.run(throughput.drive([base], 10, 1))
                _callgrind.control(proc.pid, "-z")
                _callgrind.control(proc.pid, "-i", "on")
                asyncio.run(throughput.drive([base], runs, 1))
            _callgrind.control(proc.pid, "-i", "off")
            _callgrind.control(proc.pid, "-d")
        finally:
            proc.terminate()
            proc.wait(120)
    return _callgrind.total(out)


def _dsn(config: Path) -> str:
    """The libpq URL of the database ``config`` names."""
    for line in config.read_text().splitlines():
        if line.startswith("database: "):
            return line.split(": ", 1)[1].replace("postgresql+asyncpg://", "postgresql://")
    raise RuntimeError(f"{config} names no database")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", required=True, help="the hookgate sources to run")
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--postgres-url", default=os.environ.get("HOOKGATE_TEST_POSTGRES_URL"))
    parser.add_argument("--sqlite", action="store_true",
                        help="a SQLite file instead of a PostgreSQL database")
    parser.add_argument("--decisions", action="store_true",
                        help="decisions on parked runs (PostgreSQL), each to its run's end")
    options = parser.parse_args()
    if options.decisions and options.sqlite:
        parser.error("--decisions parks its runs on PostgreSQL: drop --sqlite")
    ir = instructions(options.src, options.runs,
                      None if options.sqlite else options.postgres_url, options.decisions)
    measured = options.runs if options.decisions else options.runs + 1
    print(json.dumps({"src": options.src, "runs": options.runs,
                      "database": "sqlite" if options.sqlite else "postgresql",
                      "measured": "decisions" if options.decisions else "runs",
                      "instructions": ir,
                      "per_run": round(ir / measured)}))
