"""Instructions per ungated guarded call (callgrind), for one or more source trees.

The call of ``bench/guarded_calls.py`` (ask + report; the agent declares the audit log and
the read-only guard; a SQLite file, or with ``--postgres-url URL`` a database of its own on
that PostgreSQL server for each count), counted two ways for each ``--src`` (a tree's ``src``):
in `hookgate serve` over loopback HTTP (the server under valgrind, the client outside it),
and in process (``AsyncLocalGuard`` on the caller's loop, the whole process under
valgrind). ``valgrind --tool=callgrind --instr-atstart=no``; instrumentation is switched on
(``callgrind_control -i on``) after ``--warm-up`` calls and off after ``--calls``, so only the
measured calls count. Instruction counts do not depend on the machine's load, unlike CPU
time: this is how a change of a few per cent is told apart on a busy machine. The trees
take turns, ``--rounds`` times; prints one JSON object.

    python bench/instructions/guarded_call.py --src src --src /tmp/base/src [--calls 200]
        [--postgres-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import uuid
from contextlib import ExitStack
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import guarded_calls  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _callgrind  # noqa: E402


def _env(src: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(src), str(BENCH), os.environ.get("PYTHONPATH", "")])}


def served(src: Path, calls: int, warm_up: int, postgres: str | None) -> int:
    """Instructions of `hookgate serve` from ``src`` over ``calls`` guarded calls."""
    work = Path(tempfile.mkdtemp(prefix="cg-guarded-"))
    with ExitStack() as dropped:
        config = guarded_calls.Databases(work, postgres, dropped).config("hookgate")
        return _served(src, calls, warm_up, work, config)


def _served(src: Path, calls: int, warm_up: int, work: Path, config: Path) -> int:
    from hookgate.client import Client

    port = guarded_calls._free_port()
    url = f"http://127.0.0.1:{port}"
    out = str(work / "callgrind.out")
    proc = subprocess.Popen(
        _callgrind.command(out, sys.executable, "-m", "hookgate.cli.main", "serve", "--config",
                           str(config), "--port", str(port), "--log-level", "warning"),
        cwd=work, env=_env(src), stdout=(work / "log").open("wb"), stderr=subprocess.STDOUT)
    try:
        _callgrind.wait_for(url, proc, work / "log")
        client = Client(url, guarded_calls.TOKEN, framework="bench", timeout=120)
        call = guarded_calls._guarded(client, f"s-{uuid.uuid4().hex}")
        for i in range(warm_up):
            call(-1 - i)
        _callgrind.control(proc.pid, "-z")
        _callgrind.control(proc.pid, "-i", "on")
        for i in range(calls):
            call(i)
        _callgrind.control(proc.pid, "-i", "off")
        _callgrind.control(proc.pid, "-d")
        client.close()
    finally:
        proc.terminate()
        proc.wait(120)
    return _callgrind.total(out)


def in_process(src: Path, calls: int, warm_up: int, postgres: str | None) -> int:
    """Instructions of a process making ``calls`` guarded calls through ``src``'s
    ``AsyncLocalGuard`` (this script's ``--child``, under valgrind)."""
    work = Path(tempfile.mkdtemp(prefix="cg-guarded-"))
    out = str(work / "callgrind.out")
    with ExitStack() as dropped:
        config = guarded_calls.Databases(work, postgres, dropped).config("hookgate")
        subprocess.run(
            _callgrind.command(out, sys.executable, __file__, "--child", str(config),
                               "--calls", str(calls), "--warm-up", str(warm_up)),
            cwd=work, env=_env(src), check=True, stdout=subprocess.DEVNULL,
            stderr=(work / "log").open("wb"))
    return _callgrind.total(out)


def child(config: Path, calls: int, warm_up: int) -> None:
    """The in-process calls, switching its own instrumentation on and off."""
    from hookgate.client import Allowed
    from hookgate.client.local import AsyncLocalGuard

    async def run() -> None:
        guard = AsyncLocalGuard(config, framework="bench")
        session = f"s-{uuid.uuid4().hex}"

        async def call(i: int) -> None:
            verdict = await guard.before_call(
                agent="agent", session_id=session, call_id=f"c{i}", tool="search",
                arguments={"query": f"q{i}"})
            assert isinstance(verdict, Allowed), verdict
            await guard.report(verdict.call, output=f"3 results for q{i}")

        for i in range(warm_up):
            await call(-1 - i)
        _callgrind.control(os.getpid(), "-i", "on")
        for i in range(calls):
            await call(i)
        _callgrind.control(os.getpid(), "-i", "off")
        await guard.aclose()

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", action="append", type=Path,
                        help="a tree's src to count (repeat to compare; default: this tree's)")
    parser.add_argument("--calls", type=int, default=200, help="measured calls per count")
    parser.add_argument("--warm-up", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1, help="counts per tree and path")
    parser.add_argument("--path", choices=["serve", "in-process", "both"], default="both")
    parser.add_argument("--postgres-url", metavar="URL",
                        help="a PostgreSQL server: each count on a database of its own there "
                             "instead of a SQLite file")
    parser.add_argument("--child", metavar="CONFIG", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.calls < 1 or options.warm_up < 0 or options.rounds < 1:
        parser.error("--calls and --rounds must be at least 1, --warm-up at least 0")
    if options.child:
        child(options.child, options.calls, options.warm_up)
        return
    trees = [p.resolve() for p in (options.src or [ROOT / "src"])]
    for tree in trees:
        if not (tree / "hookgate").is_dir():
            parser.error(f"{tree} is not a source tree with a hookgate package")
    paths = {"serve": [served], "in-process": [in_process],
             "both": [served, in_process]}[options.path]
    counts: dict[str, dict[str, list[float]]] = {str(t): {} for t in trees}
    for _ in range(options.rounds):
        for measure in paths:
            for tree in trees:
                per_call = measure(tree, options.calls, options.warm_up,
                                   options.postgres_url) / options.calls
                counts[str(tree)].setdefault(measure.__name__, []).append(round(per_call))
    result = {
        "benchmark": "instructions_guarded_call",
        "what": "callgrind instructions per ungated guarded call (ask + report; audit_log "
                "and readonly_guard), measured calls only",
        "database": "sqlite" if options.postgres_url is None else "postgresql",
        "calls": options.calls,
        **_callgrind.by_tree(counts),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
