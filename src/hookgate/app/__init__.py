"""The composition root of the HTTP server: the API (hookgate.server) with the interfaces
served beside it (the MCP gateway), so neither interface imports the other. ``hookgate
serve``, the demo and the tests' servers build their app here."""

from __future__ import annotations

import importlib.util
from typing import Any

from fastapi import FastAPI

from hookgate.app.mcp_gateway import McpGatewayMount
from hookgate.runtime.deployment import Deployment
from hookgate.runtime.runtime import Runtime
from hookgate.server import app as api
from hookgate.server.serving import Server, uvicorn_config

__all__ = ["build_server", "create_app"]


def create_app(runtime: Runtime, **options: Any) -> FastAPI:
    """The server's app for ``runtime`` with the MCP gateway mounted (when configured and
    installed); ``options`` as `hookgate.server.app.create_app` takes them."""
    return api.create_app(runtime, mounts=[McpGatewayMount(runtime)], **options)


def build_server(deployment: Deployment, host: str, port: int,
                 log_level: str = "warning", *, worker: bool = True
                 ) -> tuple[Server, Runtime]:
    """A uvicorn server for ``deployment`` (not started) and its runtime; ``worker``
    False serves the API only (PostgreSQL)."""
    runtime = Runtime(deployment, worker=worker)
    # The MCP gateway's socket (for `hookgate mcp stdio`) needs the websockets package of
    # the mcp extra; without it the relay posts each message instead.
    sockets = McpGatewayMount(runtime).absent_because() is None and \
        importlib.util.find_spec("websockets") is not None
    config = uvicorn_config(create_app(runtime, own_process=True), host, port,
                            log_level=log_level, websockets=sockets)
    return Server(config), runtime
