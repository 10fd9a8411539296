"""Instructions per durable one-call run of `hookgate serve` on PostgreSQL or SQLite (callgrind).

The bench's agent (durable_path.py: one call of a cheap tool with ``audit_log``, then an
answer) in a database of its own on the cluster of ``--postgres-url`` (with ``--sqlite``:
in a SQLite file of its own, WAL, as `hookgate serve` sets it up); `hookgate serve`
from ``--src`` (a tree's ``src``) under ``valgrind --tool=callgrind --instr-atstart=no``,
instrumentation on (``callgrind_control -i on``) only over the measured runs, after ten
warm-up runs, one run at a time. Instruction counts do not depend on the machine's load,
unlike CPU time: run it once per tree and compare.

    python bench/instructions/durable_run.py --src /tmp/base/src [--runs 60]
                                             [--postgres-url URL | --sqlite]
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


def instructions(src: str, runs: int, server: str | None) -> int:
    """Instructions (callgrind's Ir) of `hookgate serve` from ``src`` over ``runs`` runs and
    the one warm-up run `throughput.drive` makes first; on SQLite with ``server`` None."""
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", required=True, help="the hookgate sources to run")
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--postgres-url", default=os.environ.get("HOOKGATE_TEST_POSTGRES_URL"))
    parser.add_argument("--sqlite", action="store_true",
                        help="a SQLite file instead of a PostgreSQL database")
    options = parser.parse_args()
    ir = instructions(options.src, options.runs,
                      None if options.sqlite else options.postgres_url)
    print(json.dumps({"src": options.src, "runs": options.runs,
                      "database": "sqlite" if options.sqlite else "postgresql",
                      "instructions": ir,
                      "per_run": round(ir / (options.runs + 1))}))
