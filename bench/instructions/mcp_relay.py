"""Instructions per relayed MCP tool call (callgrind), for one or more source trees.

The call of ``bench/mcp_gateway.py`` (``mcp-server-time``'s ``get_current_time`` over stdio)
from the official ``mcp`` client through ``hookgate mcp stdio`` (its one WebSocket) to
``hookgate serve``: both hookgate processes under ``valgrind --tool=callgrind
--instr-atstart=no``, instrumentation switched on after ``--warm-up`` calls and off after
``--calls``, so only the measured calls count, in each process. The agent is ``bare`` (the
approval gate only) or ``guarded`` (audit log, read-only guard, a rate limit). The trees take
turns, ``--rounds`` times; prints one JSON object.

    python bench/instructions/mcp_relay.py --src src --src /tmp/base/src [--calls 200]
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
from typing import Any

BENCH = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _callgrind  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

import mcp_gateway  # noqa: E402


def _relayed(src: Path, agent: str, calls: int, warm_up: int) -> dict[str, int]:
    """Instructions per call of `hookgate serve` and of the relay, both from ``src``."""
    work = Path(tempfile.mkdtemp(prefix="cg-mcp-relay-"))
    config = work / "hookgate.yaml"
    config.write_text(mcp_gateway.CONFIG.format(db=work / "hookgate.db",
                                                token=mcp_gateway.TOKEN,
                                                python=sys.executable))
    port = mcp_gateway.free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(src)}
    serve_out = str(work / "serve.out")
    relay_out = str(work / "relay.out")
    proc = subprocess.Popen(
        _callgrind.command(serve_out, sys.executable, "-m", "hookgate.cli.main", "serve",
                           "--config", str(config), "--port", str(port),
                           "--log-level", "warning"),
        cwd=work, env=env, stdout=(work / "log").open("wb"), stderr=subprocess.STDOUT)
    try:
        _callgrind.wait_for(url, proc, work / "log")
        relay = StdioServerParameters(
            command="valgrind",
            args=[*_callgrind.CALLGRIND[1:], f"--callgrind-out-file={relay_out}",
                  sys.executable, "-m", "hookgate.cli.main", "mcp", "stdio", "--agent", agent],
            env={**env, "HOOKGATE_TOKEN": mcp_gateway.TOKEN, "HOOKGATE_URL": url},
            cwd=str(work))
        asyncio.run(_calls(relay, proc.pid, calls, warm_up))
    finally:
        proc.terminate()
        proc.wait(120)
    return {"serve": _callgrind.total(serve_out) // calls,
            "relay": _callgrind.total(relay_out) // calls}


async def _calls(relay: StdioServerParameters, serve_pid: int, calls: int,
                 warm_up: int) -> None:
    # Counted in both processes over the measured calls only.
    async with Client(relay, read_timeout_seconds=600) as client:
        for _ in range(warm_up):
            await client.call_tool(mcp_gateway.GATEWAY_TOOL, mcp_gateway.TOOL_ARGS)
        pids = (serve_pid, _relay_pid())
        for pid in pids:
            _callgrind.control(pid, "-z")
            _callgrind.control(pid, "-i", "on")
        for _ in range(calls):
            result = await client.call_tool(mcp_gateway.GATEWAY_TOOL, mcp_gateway.TOOL_ARGS)
            if result.is_error:
                raise SystemExit(f"the relayed call failed: {result.content}")
        for pid in pids:
            _callgrind.control(pid, "-i", "off")
            _callgrind.control(pid, "-d")


def _relay_pid() -> int:
    # The relay under valgrind: this process's child whose command line runs `mcp stdio`.
    import psutil

    found = [p.pid for p in psutil.Process().children(recursive=True)
             if " mcp stdio " in " ".join(p.cmdline())]
    if len(found) != 1:
        raise SystemExit(f"relay process not found once: {found}")
    return int(found[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", action="append", type=Path,
                        help="a tree's src to count (repeat to compare; default: this tree's)")
    parser.add_argument("--agent", action="append", choices=["bare", "guarded"],
                        help="the agent called (repeat for both; default: guarded)")
    parser.add_argument("--calls", type=int, default=200, help="measured calls per count")
    parser.add_argument("--warm-up", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=1, help="counts per tree and agent")
    options = parser.parse_args()
    if options.calls < 1 or options.warm_up < 0 or options.rounds < 1:
        parser.error("--calls and --rounds must be at least 1, --warm-up at least 0")
    trees = [p.resolve() for p in (options.src or [BENCH.parent / "src"])]
    for tree in trees:
        if not (tree / "hookgate").is_dir():
            parser.error(f"{tree} is not a source tree with a hookgate package")
    agents = options.agent or ["guarded"]
    counts: dict[str, dict[str, list[int]]] = {str(t): {} for t in trees}
    for _ in range(options.rounds):
        for agent in agents:
            for tree in trees:
                counted = _relayed(tree, agent, options.calls, options.warm_up)
                for process, per_call in counted.items():
                    counts[str(tree)].setdefault(f"{process}_{agent}", []).append(per_call)
                print(tree, agent, counted, file=sys.stderr, flush=True)
    result: dict[str, Any] = {
        "benchmark": "instructions_mcp_relay",
        "what": "callgrind instructions per relayed MCP tools/call (mcp-server-time's "
                "get_current_time) in hookgate serve and in the hookgate mcp stdio relay, "
                "measured calls only",
        "calls": options.calls,
        **_callgrind.by_tree(counts),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
