"""Benchmark: the latency hookgate's hooks add to an ungated tool call of each coding agent
(Codex, Gemini CLI, Cursor, GitHub Copilot CLI), against a no-op command hook and a Python
command hook, and beside Claude Code's own HTTP hook through hookgate, all in one run.

Each command hook is run as its agent runs one: ``sh -c COMMAND`` with the hook input on
stdin. hookgate's hooks are the ``curl`` lines each ``hookgate AGENT install`` writes,
posting to one real ``hookgate serve`` (SQLite; the audit log and the read-only guard;
nothing needs approval): per call the hook before the tool and the one after it. Claude
Code posts its ``type: http`` hook itself (no process per call): that path is one HTTP POST
of its PreToolUse input to ``/api/claude-code/hooks``. Paths alternate in rounds so machine
load hits all of them alike; figures are medians over the rounds' medians. Prints one JSON
object; the goal per agent is a before-the-tool p50 at most 15 ms over the no-op hook, never
more than the Python hook.
Usage: python bench/coding_agent_hooks.py [--agent all|codex|gemini|cursor|copilot]
       [--calls 100] [--rounds 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from guarded_calls import _serve

from hookgate.coding_agents import codex_config, copilot_config, cursor_config, gemini_config

TOKEN = "bench-token"
CONFIG = """\
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme}}]
users: [{{id: ann, org: acme, token: {token}}}]
models: {{idle: {{type: scripted, turns: [{{answer: idle}}]}}}}
agents:
  - id: coder
    org: acme
    owner: ann
    model: idle
    model_config_json:
      hooks: {{class_hooks: [audit_log, readonly_guard]}}
      claude_code: {{rules: []}}
"""
NOOP = "cat >/dev/null"
PYTHON = (f"{sys.executable} -c 'import json,sys; json.load(sys.stdin); print(\"{{}}\")'")


def _hook(command: str, env: dict[str, str]) -> Callable[[str], None]:
    def run(stdin: str) -> None:
        done = subprocess.run(["sh", "-c", command], input=stdin, text=True,
                              capture_output=True, env=env, check=False)
        if done.returncode != 0:
            raise SystemExit(f"the hook failed ({done.returncode}): {done.stderr}")
    return run


def _input(event: str, session: str, i: int) -> str:
    body: dict[str, Any] = {"hook_event_name": event, "session_id": session, "cwd": "/tmp",
                            "turn_id": "t", "model": "gpt-5-codex", "transcript_path": None,
                            "permission_mode": "bypassPermissions", "tool_name": "Bash",
                            "tool_input": {"command": f"ls {i}"}, "tool_use_id": f"call_{i}"}
    if event == "PostToolUse":
        body["tool_response"] = f"{i}\n"
    return json.dumps(body)


def _gemini_input(event: str, session: str, i: int) -> str:
    """Gemini CLI's BeforeTool / AfterTool input for the shell call ``ls i``."""
    body: dict[str, Any] = {"hook_event_name": event, "session_id": session, "cwd": "/tmp",
                            "transcript_path": "", "timestamp": f"2026-12-06T00:00:{i}Z",
                            "tool_name": "run_shell_command", "tool_input": {"command": f"ls {i}"}}
    if event == "AfterTool":
        body["tool_response"] = {"llmContent": f"{i}\n", "returnDisplay": f"{i}\n"}
    return json.dumps(body)


def _cursor_input(event: str, session: str, i: int) -> str:
    """Cursor's documented preToolUse / postToolUse input for the same call."""
    body: dict[str, Any] = {"hook_event_name": event, "conversation_id": session,
                            "generation_id": "g", "workspace_roots": ["/tmp"], "cwd": "",
                            "tool_name": "Shell", "tool_input": {"command": f"ls {i}"},
                            "tool_use_id": f"cursor_{i}"}
    if event == "postToolUse":
        body["tool_output"] = json.dumps({"output": f"{i}\n", "exitCode": 0})
    return json.dumps(body)


def _copilot_input(event: str, session: str, i: int) -> str:
    """Copilot CLI's stdin: camelCase, no event name, no call id (hookgate derives it)."""
    body: dict[str, Any] = {"sessionId": session, "timestamp": 1796543268076, "cwd": "/tmp",
                            "toolName": "bash",
                            "toolArgs": {"command": f"ls {i}", "description": "list"}}
    if event == "postToolUse":
        body["toolResult"] = {"resultType": "success", "textResultForLlm": f"{i}\n"}
    return json.dumps(body)


def _nested(block: dict[str, Any], event: str) -> str:
    """The command of a Claude Code-shaped hooks block (Codex, Gemini CLI)."""
    return str(block["hooks"][event][0]["hooks"][0]["command"])


def _flat(block: dict[str, Any], event: str) -> str:
    """The command of a flat hooks block (Cursor)."""
    return str(block["hooks"][event][0]["command"])


def _bash(block: dict[str, Any], event: str) -> str:
    """The command of Copilot CLI's hooks file."""
    return str(block["hooks"][event][0]["bash"])


#: Per agent: its hooks block, how a command is found in it, its before and after events,
#: and its hook input.
_Agent = tuple[Callable[..., dict[str, Any]], Callable[[dict[str, Any], str], str], str, str,
               Callable[[str, str, int], str]]
AGENTS: dict[str, _Agent] = {
    "codex": (codex_config.hooks_block, _nested, "PreToolUse", "PostToolUse", _input),
    "gemini": (gemini_config.hooks_block, _nested, "BeforeTool", "AfterTool", _gemini_input),
    "cursor": (cursor_config.hooks_block, _flat, "preToolUse", "postToolUse", _cursor_input),
    "copilot": (copilot_config.hooks_file, _bash, "preToolUse", "postToolUse", _copilot_input),
}


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered) * 1e3, 2),
            "p99_ms": round(p99 * 1e3, 2)}


def _claude_code(url: str) -> Callable[[str, int], None]:
    """Claude Code's own ``type: http`` PreToolUse hook: one POST per call, no process."""
    client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"})

    def run(session: str, i: int) -> None:
        body = {"hook_event_name": "PreToolUse", "session_id": session, "cwd": "/tmp",
                "transcript_path": "/tmp/t.jsonl", "permission_mode": "default",
                "tool_name": "Bash", "tool_input": {"command": f"ls {i}"},
                "tool_use_id": f"toolu_{i}"}
        r = client.post("/api/claude-code/hooks", params={"agent": "coder"}, json=body)
        if r.status_code != 200:
            raise SystemExit(f"Claude Code's hook failed ({r.status_code}): {r.text}")
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100, help="calls per path per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="two calls per path (for the tests)")
    parser.add_argument("--agent", choices=["all", *sorted(AGENTS)], default="all")
    opts = parser.parse_args()
    calls, rounds = (2, 1) if opts.quick else (opts.calls, opts.rounds)
    warm_ups = 1 if opts.quick else 3
    agents = sorted(AGENTS) if opts.agent == "all" else [opts.agent]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOOKGATE_TOKEN": TOKEN}
    with tempfile.TemporaryDirectory(prefix="hookgate-bench-") as tmp:
        work = Path(tmp)
        config = work / "served.yaml"
        config.write_text(CONFIG.format(db=work / "served.db", token=TOKEN))
        proc, url = _serve(config, work / "serve.log")
        noop, python = _hook(NOOP, env), _hook(PYTHON, env)
        claude_code = _claude_code(url)
        session = f"s-{uuid.uuid4().hex}"
        paths: dict[str, Callable[[int], None]] = {
            "noop_command_hook": lambda i: noop(_input("PreToolUse", session, i)),
            "python_command_hook": lambda i: python(_input("PreToolUse", session, i)),
            "claude_code_http_pre_tool_use": lambda i: claude_code(f"cc-{session}", i),
        }
        for name in agents:
            hooks_block, find, before, after, make = AGENTS[name]
            block = hooks_block(url, "coder", token_env="HOOKGATE_TOKEN", wait_s=20)
            pre, post = _hook(find(block, before), env), _hook(find(block, after), env)
            own = f"{name}-{session}"
            paths[f"{name}_pre_tool_use"] = (
                lambda i, pre=pre, make=make, before=before, own=own: pre(make(before, own, i)))
            paths[f"{name}_post_tool_use"] = (
                lambda i, post=post, make=make, after=after, own=own: post(make(after, own, i)))
        medians: dict[str, list[float]] = {name: [] for name in paths}
        every: dict[str, list[float]] = {name: [] for name in paths}
        try:
            for i in range(warm_ups):  # each session's SessionStart, connections
                for run in paths.values():
                    run(-1 - i)
            n = 0
            for _ in range(rounds):
                for name, run in paths.items():
                    samples = []
                    for _ in range(calls):
                        n += 1
                        started = time.perf_counter()
                        run(n)
                        samples.append(time.perf_counter() - started)
                    medians[name].append(statistics.median(samples))
                    every[name].extend(samples)
        finally:
            proc.terminate()
            proc.wait(30)
    figures = {name: {**_ms(every[name]),
                      "median_of_round_p50s_ms": round(statistics.median(m) * 1e3, 2)}
               for name, m in medians.items()}

    def p50(name: str) -> float:
        return float(figures[name]["median_of_round_p50s_ms"])

    base = p50("noop_command_hook")
    added = {name: {"pre_tool_use_over_noop_p50_ms": round(p50(f"{name}_pre_tool_use") - base, 2),
                    "per_call_over_noop_p50_ms": round(
                        p50(f"{name}_pre_tool_use") + p50(f"{name}_post_tool_use") - 2 * base, 2),
                    "pre_tool_use_over_claude_code_p50_ms": round(
                        p50(f"{name}_pre_tool_use") - p50("claude_code_http_pre_tool_use"), 2),
                    "within_15_ms": p50(f"{name}_pre_tool_use") - base <= 15,
                    "below_python_hook": (p50(f"{name}_pre_tool_use")
                                          <= p50("python_command_hook"))}
             for name in agents}
    print(json.dumps({
        "benchmark": "coding_agent_hooks",
        "agents": agents,
        "calls_per_path": calls * rounds,
        "rounds": rounds,
        **figures,
        "added": added,
        "database": "sqlite",
        "hooks": ["audit_log", "readonly_guard"],
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_average_at_end": os.getloadavg()[0]},
    }, indent=2))


if __name__ == "__main__":
    main()
