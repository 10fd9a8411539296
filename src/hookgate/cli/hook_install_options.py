"""What every ``hookgate <coding agent> install`` shares: its options (Claude Code, Codex, and the
agents after them): which agent's rules apply, which server the hooks call, and which
environment variable holds the developer's token — and how it writes the agent's file,
removes hookgate's hooks from it and probes the installed SessionStart hook, so the commands
agree."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

AgentOption = Annotated[str, typer.Option("--agent", help="The agent whose rules apply.")]
ServerUrlOption = Annotated[str | None, typer.Option(
    "--url", help="The hookgate server (default: server.public_url, else "
                  "http://127.0.0.1:8000).")]
TokenEnvOption = Annotated[str, typer.Option(
    "--token-env", help="The environment variable holding the developer's hookgate "
                        "token (the token itself is never written).")]
WaitOption = Annotated[float | None, typer.Option(
    "--wait", help="Seconds hookgate waits for a person (default: the agent's "
                   "coding_agents.wait_s, else 20).")]


def hook_server(given: str | None) -> str:
    """The server a coding agent's hooks call: ``given`` (or the local default) as a base
    URL, a trailing ``/api`` accepted; exit 2 with the reason for anything else."""
    from hookgate.cli.app import fail
    from hookgate.cli.server_url import NotAServerUrl, server_base

    try:
        return server_base(given or "http://127.0.0.1:8000")
    except NotAServerUrl as exc:
        fail(str(exc), 2)


def write_hooks(target: Path, block: dict[str, Any],
                merge_into: Callable[[Path, dict[str, Any]], dict[str, Any]]) -> None:
    """Write ``block`` into the agent's configuration file ``target``, keeping what is
    there (``merge_into`` is that agent's own merge); exit 1 with the reason when the file
    cannot be read or written."""
    from hookgate.cli.app import fail

    try:
        merged = merge_into(target, block)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    except (ValueError, OSError) as exc:
        fail(f"cannot update {target}: {exc}")


def server_and_wait(agent: str, config: Path | None, example: str | None, url: str | None,
                    wait_s: float | None, token_env: str) -> tuple[str, float]:
    """The server a command-hook agent's hooks call and how long hookgate waits for a
    person: the options, else the configuration's ``server.public_url`` and the agent's
    ``coding_agents.wait_s``, else the defaults; exit with the reason on a bad one, or on a
    ``token_env`` that ``sh`` cannot expand."""
    from hookgate.cli.app import fail
    from hookgate.cli.config_source import load_from_options
    from hookgate.coding_agents.forwarder import is_env_name

    if not is_env_name(token_env):
        fail(f"--token-env {token_env!r} is not an environment variable name")

    server, wait = url, wait_s
    if config is not None or example is not None:
        from hookgate.config import ConfigError
        from hookgate.external.coding.policy import CodingAgentPolicy
        from hookgate.hooks.errors import HookBuildError

        cfg = load_from_options(config, example, code=1)
        try:
            wait = wait if wait is not None else CodingAgentPolicy.of(cfg.build_agent(agent)).wait_s
        except (ConfigError, HookBuildError) as exc:
            fail(str(exc))
        server = server or cfg.server.public_url
    from hookgate.coding_agents.forwarder import checked_wait_s

    try:
        wait = checked_wait_s(wait if wait is not None else 20.0)
    except ValueError as exc:
        fail(f"--wait: {exc}", 2)
    return hook_server(server), wait


def remove_hooks(target: Path, remove_from: Callable[[Path], dict[str, Any]]) -> None:
    """Write ``target`` without hookgate's hooks (``remove_from`` is that agent's own)."""
    from hookgate.cli.app import console, fail

    if not target.exists():
        console.print(f"{target} does not exist: nothing to remove", highlight=False)
        return
    try:
        kept = remove_from(target)
    except (ValueError, OSError) as exc:
        fail(f"cannot update {target}: {exc}")
    target.write_text(json.dumps(kept, indent=2) + "\n", encoding="utf-8")
    console.print(f"removed hookgate's hooks from {target}", highlight=False, soft_wrap=True)


def probe_session_start(command: str, folder: Path, token_env: str,
                        facts: dict[str, str]) -> None:
    """Run hookgate's SessionStart hook ``command`` as the agent would, in ``folder``, with
    a probe session (``facts`` add the agent's own fields); exit 1 when it gets no answer."""
    from hookgate.cli.app import fail

    probe = json.dumps({"hook_event_name": "SessionStart", "cwd": str(folder),
                        "session_id": f"hookgate-check-{uuid.uuid4()}", **facts})
    done = subprocess.run(["sh", "-c", command], input=probe, text=True,
                          capture_output=True, cwd=folder, timeout=120, check=False)
    if done.returncode != 0:
        fail(f"check failed: the hook does not reach hookgate: {done.stderr.strip()} "
             f"(is {token_env} set?)")
