"""``hookgate mcp``: the MCP gateway's commands (``stdio`` serves one local MCP client)."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Annotated

import typer

from hookgate.cli.app import app, fail
from hookgate.cli.config_source import ConfigOption, ExampleOption, load_from_options

mcp_app = typer.Typer(help="The MCP gateway: downstream MCP servers behind hookgate's hooks.",
                      no_args_is_help=True)
app.add_typer(mcp_app, name="mcp")


@mcp_app.callback()
def needs_the_extra() -> None:
    """Every ``hookgate mcp`` command needs the MCP SDK (the ``hookgate[mcp]`` extra)."""
    from hookgate.mcp.extra import mcp_installed, missing_sdk

    if not mcp_installed():
        fail(missing_sdk(), 2)


@mcp_app.command()
def stdio(
    agent: Annotated[str, typer.Option("--agent", help="The agent whose tools to serve.")],
    url: Annotated[str | None, typer.Option(
        "--url", envvar="HOOKGATE_URL", show_default=False,
        help="The hookgate server's base URL (HOOKGATE_URL).")] = None,
    in_process: Annotated[bool, typer.Option(
        "--in-process", help="Run the gateway in this process with the server's database and "
        "secrets key (only on a machine trusted with both); needs --config.")] = False,
    connection: Annotated[str, typer.Option(
        "--connection", help="How the relay reaches the server: 'socket' (one WebSocket for "
        "the whole session; an HTTP request per message when the server offers none) or "
        "'http' (an HTTP request per message, e.g. behind a proxy that breaks "
        "WebSockets).")] = "socket",
    config: ConfigOption = None,
    example: ExampleOption = None,
) -> None:
    """Serve the gateway over stdin/stdout; the user is the token in HOOKGATE_TOKEN.

    By default a thin client of a running server: every message goes to its gateway
    (HOOKGATE_URL/mcp/AGENT, over one WebSocket unless --connection http) with the token; no
    database or secrets key is needed here.
    --in-process opens the server's database and secrets key (HOOKGATE_SECRETS_KEY when
    channels are configured) on this machine: use it only where this machine is trusted with
    them.
    """
    from hookgate.mcp.refusal import TOKEN_ENV, StdioRefusal, one_line

    # stdout carries the protocol: every log line goes to stderr.
    logging.basicConfig(level=logging.WARNING)
    token = os.environ.get(TOKEN_ENV)
    if connection not in ("socket", "http"):
        fail(f"--connection must be 'socket' or 'http', not {connection!r}", 2)
    try:
        if in_process:
            from hookgate.config.modes import watch_config_modes
            from hookgate.mcp.stdio import serve_stdio

            cfg = load_from_options(config, example, code=2, one_line=True)
            # `hookgate policy reload` switches modes here too, as in `hookgate serve`.
            if (why := watch_config_modes(cfg)) is not None:
                logging.getLogger("hookgate.mcp.stdio").warning("%s", why)
            asyncio.run(serve_stdio(cfg, agent, token))
        else:
            if config is not None or example is not None:
                fail("--config and --example go with --in-process; without it, hookgate mcp "
                     "stdio forwards to the server at HOOKGATE_URL", 2)
            from hookgate.cli.server_url import NotAServerUrl, server_base
            from hookgate.mcp.relay import relay_stdio

            try:
                url = server_base(url) if url else url
            except NotAServerUrl as exc:
                fail(str(exc), 2)
            asyncio.run(relay_stdio(url, agent, token, socket=connection == "socket"))
    except StdioRefusal as exc:
        fail(one_line(str(exc)), 2)
    except KeyboardInterrupt:
        pass
