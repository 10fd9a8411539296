"""System calls per durable one-call run of `hookgate serve` on PostgreSQL or SQLite (strace).

The run of ``durable_run.py`` (the bench's agent: one call of a cheap tool with
``audit_log``, then an answer; its event stream followed to the end, then its status read),
driven over HTTP by ``--concurrency`` clients, `hookgate serve` from ``--src``. After the
warm-up runs, ``strace -c -f`` is attached to the server (all its threads) for the measured
runs only, then detached; its summary gives each system call's count. Like instruction
counts, these do not depend on the machine's load: a write to a socket is a ``sendto``
however busy the machine is. Run it once per tree and compare (``strace`` needed:
``apt-get install strace``).

    python bench/instructions/syscalls.py --src /tmp/base/src [--runs 500]
                                          [--concurrency 8] [--postgres-url URL | --sqlite]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH))

import throughput  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _callgrind  # noqa: E402
import durable_run  # noqa: E402


def counted(summary: str) -> dict[str, int]:
    """Each system call's count from ``strace -c``'s summary table."""
    calls: dict[str, int] = {}
    for line in summary.splitlines():
        fields = line.split()
        # "% time  seconds  usecs/call  calls  [errors]  syscall"; the rule and total lines
        # are skipped.
        if len(fields) < 5 or not fields[3].isdigit() or fields[-1] == "total":
            continue
        calls[fields[-1]] = int(fields[3])
    if not calls:
        raise SystemExit(f"strace wrote no summary:\n{summary[-2000:]}")
    return calls


def syscalls(src: str, runs: int, concurrency: int, server: str | None) -> dict[str, int]:
    """Each system call's count in `hookgate serve` from ``src`` over ``runs`` runs (after
    as many warm-up runs as there are clients, and ``concurrency`` more that `drive` makes
    first); on SQLite with ``server`` None."""
    work = Path(tempfile.mkdtemp(prefix="strace-durable-"))
    out = work / "strace.txt"
    with durable_run._served(work, server, src) as (config, env):
        port = throughput.free_port()
        base = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen(
            [*throughput.hookgate_command(), "serve", "--config", str(config), "--port",
             str(port), "--log-level", "warning"],
            cwd=work, env=env, stdout=(work / "log").open("wb"), stderr=subprocess.STDOUT)
        try:
            _callgrind.wait_for(base, proc, work / "log")
            asyncio.run(throughput.drive([base], 10 * concurrency, concurrency))
            tracer = subprocess.Popen(["strace", "-c", "-f", "-p", str(proc.pid), "-o",
                                       str(out)], stderr=subprocess.PIPE, text=True)
            _attached(tracer, out)
            asyncio.run(throughput.drive([base], runs, concurrency))
            tracer.send_signal(signal.SIGINT)
            _, err = tracer.communicate(timeout=120)
            if tracer.returncode not in (0, -signal.SIGINT) or not out.exists():
                raise SystemExit(f"strace failed ({tracer.returncode}): {err[-2000:]}")
        finally:
            proc.terminate()
            proc.wait(120)
    return counted(out.read_text())


def _attached(tracer: subprocess.Popen[str], out: Path) -> None:
    """Until strace has attached (it opens its output file as it starts tracing)."""
    deadline = time.monotonic() + 60
    while not out.exists():
        if tracer.poll() is not None or time.monotonic() > deadline:
            err = tracer.stderr.read() if tracer.stderr is not None else ""
            raise SystemExit(f"strace did not attach: {err[-2000:]}")
        time.sleep(0.05)
    time.sleep(0.5)  # its threads are attached one by one after the file is open


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", required=True, help="the hookgate sources to run")
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--postgres-url", default=os.environ.get("HOOKGATE_TEST_POSTGRES_URL"))
    parser.add_argument("--sqlite", action="store_true",
                        help="a SQLite file instead of a PostgreSQL database")
    options = parser.parse_args()
    if options.runs < 1 or options.concurrency < 1:
        parser.error("--runs and --concurrency must be at least 1")
    if not options.sqlite and not options.postgres_url:
        parser.error("--postgres-url (or HOOKGATE_TEST_POSTGRES_URL) is needed, or --sqlite")
    src = Path(options.src).resolve()  # the server runs in a folder of its own
    if not (src / "hookgate").is_dir():
        parser.error(f"{src} is not a source tree with a hookgate package")
    if shutil.which("strace") is None:
        parser.error("strace is not installed (apt-get install strace)")
    calls = syscalls(str(src), options.runs, options.concurrency,
                     None if options.sqlite else options.postgres_url)
    # The clients' first runs (`drive`'s warm-up, one per client) are measured too.
    measured = options.runs + options.concurrency
    print(json.dumps({
        "benchmark": "syscalls_durable_run",
        "src": str(src), "runs": options.runs, "concurrency": options.concurrency,
        "database": "sqlite" if options.sqlite else "postgresql",
        "per_run": round(sum(calls.values()) / measured, 2),
        "by_call": {name: round(n / measured, 2)
                    for name, n in sorted(calls.items(), key=lambda kv: -kv[1])},
    }, indent=1))
