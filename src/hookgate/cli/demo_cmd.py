"""``hookgate demo``: the approval gate end to end, with nothing to configure."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from hookgate.cli.app import app, console, fail
from hookgate.cli.serve_cmd import HostOption, PortOption


@app.command()
def demo(
    host: HostOption = "127.0.0.1",
    port: PortOption = 8765,
    directory: Annotated[Path, typer.Option("--dir", help="Where the demo's SQLite file "
                                            "lives.", file_okay=False)] = Path("."),
    exit_after_run: Annotated[bool, typer.Option(
        "--exit-after-run", help="Stop the server when the demo run ends.")] = False,
) -> None:
    """Start a server with a demo org and a purchasing agent, run it, and wait for your
    approval of the 60,000 payment (in the browser or with `hookgate approvals approve`)."""
    from hookgate.demo.runner import run_demo
    from hookgate.server.serving import PortUnavailable

    directory.mkdir(parents=True, exist_ok=True)
    try:
        status = asyncio.run(run_demo(console, host=host, port=port,
                                      directory=directory.resolve(),
                                      keep_serving=not exit_after_run))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except PortUnavailable as exc:
        fail(str(exc))
    raise typer.Exit(0 if status == "completed" else 1)
