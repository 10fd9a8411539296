"""What every ``hookgate <coding agent> install`` shares: its options (Claude Code, Codex, and the
agents after them): which agent's rules apply, which server the hooks call, and which
environment variable holds the developer's token — and how it writes the agent's file,
so the commands agree."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from hookgate.cli.config_source import load_from_options

AgentOption = Annotated[str, typer.Option("--agent", help="The agent whose rules apply.")]
ServerUrlOption = Annotated[str | None, typer.Option(
    "--url", help="The hookgate server (default: server.public_url, else "
                  "http://127.0.0.1:8000).")]
TokenEnvOption = Annotated[str, typer.Option(
    "--token-env", help="The environment variable holding the developer's hookgate "
                        "token (the token itself is never written).")]
WaitOption = Annotated[float | None, typer.Option(
    "--wait", help="Seconds hookgate waits for a person (default: the agent's "
                   "claude_code.wait_s, else 20).")]


def hook_settings(agent: str, config: Path | None, example: str | None, url: str | None,
                  wait_s: float | None) -> tuple[str, float]:
    """The server the hooks call and hookgate's wait for a person: the options, else the
    configuration's ``server.public_url`` and the agent's ``claude_code.wait_s``; exit with
    the reason when the configuration or the URL is wrong."""
    from hookgate.cli.app import fail

    server, wait = url, wait_s
    if config is not None or example is not None:
        from hookgate.claude_code.policy import ExternalPolicy
        from hookgate.config import ConfigError
        from hookgate.hooks.errors import HookBuildError

        cfg = load_from_options(config, example, code=1)
        try:
            wait = wait if wait is not None else ExternalPolicy.of(cfg.build_agent(agent)).wait_s
        except (ConfigError, HookBuildError) as exc:
            fail(str(exc))
        server = server or cfg.server.public_url
    return hook_server(server), wait if wait is not None else 20.0


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
