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

AgentOption = Annotated[str, typer.Option("--agent", help="The agent whose rules apply.")]
ServerUrlOption = Annotated[str | None, typer.Option(
    "--url", help="The hookgate server (default: server.public_url, else "
                  "http://127.0.0.1:8000).")]
TokenEnvOption = Annotated[str, typer.Option(
    "--token-env", help="The environment variable holding the developer's hookgate "
                        "token (the token itself is never written).")]


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
