"""Instructions per durable one-call run of `hookgate serve` on PostgreSQL (callgrind).

The bench's agent (durable_path.py: one call of a cheap tool with ``audit_log``, then an
answer) in a database of its own on the cluster of ``--postgres-url``; `hookgate serve`
from ``--src`` (a tree's ``src``) under ``valgrind --tool=callgrind --instr-atstart=no``,
instrumentation on (``callgrind_control -i on``) only over the measured runs, after ten
warm-up runs, one run at a time. Instruction counts do not depend on the machine's load,
unlike CPU time: run it once per tree and compare.

    python bench/instructions/durable_run.py --src /tmp/base/src [--runs 60] [--postgres-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH))

import durable_path  # noqa: E402
import throughput  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _callgrind  # noqa: E402


def instructions(src: str, runs: int, server: str) -> int:
    """Instructions (callgrind's Ir) of `hookgate serve` from ``src`` over ``runs`` runs and
    the one warm-up run `throughput.drive` makes first."""
    work = Path(tempfile.mkdtemp(prefix="cg-durable-"))
    out = str(work / "callgrind.out")
    with throughput.postgres_database(server) as (url, admin, name):
        hookgate = durable_path.Hookgate(url, admin, name, work, src=src, start_stop=True)
        port = throughput.free_port()
        base = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen(
            _callgrind.command(out, *throughput.hookgate_command(), "serve", "--config",
                               str(hookgate.config), "--port", str(port),
                               "--log-level", "warning"),
            cwd=work, env=hookgate.env, stdout=(work / "log").open("wb"),
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
    options = parser.parse_args()
    ir = instructions(options.src, options.runs, options.postgres_url)
    print(json.dumps({"src": options.src, "runs": options.runs, "instructions": ir,
                      "per_run": round(ir / (options.runs + 1))}))
