"""Runs the demo: the server, a demo run that reaches the gate, and the run's story in the
terminal until someone approves in the browser or with `hookgate approvals approve`."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from rich.console import Console
from rich.panel import Panel

from hookgate.cli.event_view import EventView
from hookgate.demo.world import DEMO_MESSAGE, demo_deployment
from hookgate.server.serving import build_server


async def run_demo(console: Console, *, host: str, port: int, directory: Path,
                   keep_serving: bool) -> str:
    """Serve, start the demo run, narrate it; returns the run's final status."""
    url = f"http://{host}:{port}"
    deployment, token = demo_deployment(directory, url)
    server, runtime = build_server(deployment, host, port)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()
            raise RuntimeError(f"the server did not start on {url}")
        await asyncio.sleep(0.05)

    console.print(Panel.fit(
        f"[bold]hookgate demo[/] — a purchasing agent whose payments above 50,000 need a "
        f"person's approval.\n\n"
        f"Inbox:  [link={url}/]{url}/[/link]\n"
        f"Token:  [bold]{token}[/]  (sign in with it; it is new each time the demo starts)\n"
        f"Data:   {directory / 'hookgate-demo.db'}",
        border_style="cyan"))

    state = await runtime.runs.start("buyer", DEMO_MESSAGE, user_id="alice", org_id="acme")
    console.print(f"[dim]run {state.run_id}:[/] {DEMO_MESSAGE}")
    view = EventView(console)
    status = "unknown"
    async for event in runtime.runs.bus.subscribe(state.run_id):
        view.show(event)
        if event.type == "confirmation_pending":
            rid = event.data["request_id"]
            console.print(Panel.fit(
                "Waiting for a person. Approve or reject it in the browser:\n"
                f"  {url}/#/confirmations/{rid}\n"
                "or from another terminal:\n"
                f"  hookgate approvals approve {rid} --url {url} --token {token}",
                title="approval needed", border_style="yellow"))
        if event.type == "done":
            status = str(event.data.get("status"))
    console.print(f"[bold]run finished: {status}[/]")
    if keep_serving:
        console.print(f"The server keeps running at {url}/ — press Ctrl-C to stop.")
    else:
        server.should_exit = True
    with contextlib.suppress(asyncio.CancelledError):
        await serving
    return status
