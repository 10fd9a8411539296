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
    fresh: Annotated[bool, typer.Option(
        "--fresh/--keep-data",
        help="Start from an empty demo database (default), removing an earlier demo's; "
             "--keep-data keeps its approvals and standing rules, which may approve the "
             "payment without asking.")] = True,
) -> None:
    """Start a server with a demo org and a purchasing agent, run it, and wait for your
    approval of the 60,000 payment (in the browser or with `hookgate approvals approve`)."""
    from hookgate.demo.runner import run_demo
    from hookgate.demo.world import DemoData, DemoDataBusy
    from hookgate.server.serving import PortUnavailable

    directory.mkdir(parents=True, exist_ok=True)
    data = DemoData(directory.resolve())
    try:
        kept = data.keep() if not fresh else None
        removed = data.reset() if fresh else False
    except DemoDataBusy as exc:
        fail(str(exc))
    try:
        status = asyncio.run(run_demo(console, host=host, port=port, data=data,
                                      data_note=_data_note(kept, removed),
                                      keep_serving=not exit_after_run))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except PortUnavailable as exc:
        fail(str(exc))
    if status == "stopped":  # Ctrl-C before the run finished
        raise typer.Exit(130)
    raise typer.Exit(0 if status == "completed" else 1)


def _data_note(kept: bool | None, removed: bool) -> str:
    if kept:
        return ("kept from an earlier demo (--keep-data): its standing rules may approve "
                "the payment without asking; --fresh starts over")
    if kept is False:
        return "new (--keep-data found no earlier demo data)"
    if removed:
        return "new: an earlier demo's data was removed (--keep-data keeps it)"
    return "new"
