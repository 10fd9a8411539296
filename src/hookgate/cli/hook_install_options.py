"""The options every ``hookgate <coding agent> install`` shares (Claude Code, Codex, and the
agents after them): which agent's rules apply, which server the hooks call, and which
environment variable holds the developer's token — worded once, so the commands agree."""

from __future__ import annotations

from typing import Annotated

import typer

AgentOption = Annotated[str, typer.Option("--agent", help="The agent whose rules apply.")]
ServerUrlOption = Annotated[str | None, typer.Option(
    "--url", help="The hookgate server (default: server.public_url, else "
                  "http://127.0.0.1:8000).")]
TokenEnvOption = Annotated[str, typer.Option(
    "--token-env", help="The environment variable holding the developer's hookgate "
                        "token (the token itself is never written).")]
