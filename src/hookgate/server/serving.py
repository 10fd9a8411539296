"""Run the server with uvicorn (used by `hookgate serve` and `hookgate demo`)."""

from __future__ import annotations

import uvicorn

from hookgate.server.app import create_app
from hookgate.server.deployment import Deployment
from hookgate.server.runtime import Runtime


def build_server(deployment: Deployment, host: str, port: int,
                 log_level: str = "warning", *, worker: bool = True
                 ) -> tuple[uvicorn.Server, Runtime]:
    """A uvicorn server for ``deployment`` (not started) and its runtime; ``worker``
    False serves the API only (PostgreSQL)."""
    runtime = Runtime(deployment, worker=worker)
    app = create_app(runtime)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on",
                            timeout_graceful_shutdown=5)
    return uvicorn.Server(config), runtime
