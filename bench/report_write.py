"""Benchmark: what PostgreSQL spends on a guarded call's last write, the result's fact with
the two ledger finishes it says the model reads (decision record 0046), written as one
statement (`PostgresBackend.add_fact_finishing`) against the three statements in autocommit
it was before (the fact, then each finish), side by side in one run.

A database of its own on the server of ``--postgres-url`` (migrated by hookgate, dropped
after), one asyncpg connection, each statement prepared once. The two forms take turns in
``--rounds`` blocks of ``--writes`` writes, the form that goes first changing every round.
Per write: the backend's CPU (``/proc/PID/schedstat``: the server must run on this machine)
and the wall time of the round trips. Prints one JSON object with each round's figures and
their medians.

    python bench/report_write.py --postgres-url postgresql://postgres@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import pgcluster  # noqa: E402

from hookgate.storage.backends.postgresql import _fact_finishing, _s  # noqa: E402
from hookgate.storage.database import Database  # noqa: E402


def backend_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


async def measure(url: str, writes: int, rounds: int) -> dict[str, list[dict[str, float]]]:
    database = Database(url)
    await database.upgrade()
    await database.dispose()
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        pid = conn.get_server_pid()
        insert, finish = _s("fact_insert"), _s("finish")
        one = _fact_finishing(insert.sql, 2)
        at = datetime.now(UTC)
        calls = writes * rounds * 2 + 40
        await conn.execute(  # two started calls per write, whose finishes it writes
            "INSERT INTO tool_executions (run_id, tool_call_id, tool_name, args_sha256, "
            "started_at) SELECT 'r' || g, k || g, 'search', 'x', now() "
            "FROM generate_series(0, $1) AS g, unnest(ARRAY['a', 'b']) AS k", calls)
        fact = ("s", "result", False, "search", "c", "3 results for q", at)

        async def three(i: int) -> None:
            await conn.execute(insert.sql, *insert.args(fact))
            for call in ("a", "b"):
                await conn.execute(finish.sql, *finish.args(
                    ("3 results for q", True, at, f"r{i}", f"{call}{i}")))

        async def one_statement(i: int) -> None:
            await conn.execute(one, *insert.args(fact), at,
                               *(v for call in ("a", "b")
                                 for v in ("3 results for q", True, f"r{i}", f"{call}{i}")))

        forms: dict[str, Callable[[int], Awaitable[None]]] = {
            "three_statements": three, "one_statement": one_statement}
        n = 0
        for _ in range(20):  # both prepared, the plans cached
            for form in forms.values():
                await form(n)
                n += 1
        figures: dict[str, list[dict[str, float]]] = {name: [] for name in forms}
        for r in range(rounds):
            for name in (list(forms) if r % 2 == 0 else list(reversed(forms))):
                cpu, started = backend_cpu_s(pid), time.perf_counter()
                for _ in range(writes):
                    await forms[name](n)
                    n += 1
                figures[name].append({
                    "backend_cpu_us": round((backend_cpu_s(pid) - cpu) / writes * 1e6, 1),
                    "wall_us": round((time.perf_counter() - started) / writes * 1e6, 1)})
        return figures
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres-url", required=True,
                        help="a PostgreSQL server on this machine (a database is made on it)")
    parser.add_argument("--writes", type=int, default=500, help="writes per form per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="small sizes (for the tests)")
    opts = parser.parse_args()
    writes, rounds = (5, 2) if opts.quick else (opts.writes, opts.rounds)
    if writes < 1 or rounds < 1:
        parser.error("--writes and --rounds must be at least 1")
    server = opts.postgres_url
    url = pgcluster.create_database(server, "bench_")
    try:
        figures = asyncio.run(measure(url, writes, rounds))
    finally:
        pgcluster.drop_database(server, url)
    out: dict[str, Any] = {"benchmark": "report_write", "writes_per_round": writes,
                           "rounds": rounds}
    for name, measured in figures.items():
        out[name] = {key: round(statistics.median(m[key] for m in measured), 1)
                     for key in ("backend_cpu_us", "wall_us")} | {"rounds": measured}
    out["one_over_three"] = {
        key: round(out["one_statement"][key] / max(out["three_statements"][key], 1.0), 2)
        for key in ("backend_cpu_us", "wall_us")}
    out["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                      "load_average": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
