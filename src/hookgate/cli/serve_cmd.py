"""``hookgate serve``: the HTTP API, the web inbox and channel callbacks for a configuration."""

from __future__ import annotations

from typing import Annotated

import typer

from hookgate.cli.app import app, console, fail
from hookgate.cli.config_source import (
    ConfigOption,
    ExampleOption,
    load_from_options,
    show_database,
    start_telemetry,
)


def _port(value: int) -> int:
    # A callback rather than min/max: the help then reads <int>, not a range expression.
    if not 1 <= value <= 65535:
        raise typer.BadParameter(f"{value} is not a port (1 to 65535)")
    return value


HostOption = Annotated[str, typer.Option(help="Interface to listen on.")]
PortOption = Annotated[int, typer.Option(help="Port to listen on (1 to 65535).",
                                         callback=_port)]


@app.command()
def serve(
    config: ConfigOption = None,
    example: ExampleOption = None,
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Serve the API and the web inbox; runs waiting for approval resume on start."""
    from hookgate.server.channel_records import SecretsKey, SecretsKeyError
    from hookgate.server.deployment import deployment_from_config
    from hookgate.server.serving import PortUnavailable, build_server, listen

    cfg = load_from_options(config, example, code=2)
    if cfg.channels:
        try:
            SecretsKey.from_environment()
        except SecretsKeyError as exc:
            fail(str(exc), 2)
    try:
        sock = listen(host, port)
    except PortUnavailable as exc:
        fail(str(exc))
    start_telemetry(cfg)
    server, _ = build_server(deployment_from_config(cfg), host, port, log_level=log_level)
    console.print(f"hookgate serving {cfg.source} on http://{host}:{port}/", highlight=False,
                  soft_wrap=True)
    show_database(cfg.database)
    server.run(sockets=[sock])
