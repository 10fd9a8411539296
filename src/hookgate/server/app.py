"""The FastAPI application: the HTTP API of SPEC §6 and the web portal at ``/``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from hookgate.mcp import http as mcp_routes
from hookgate.mcp.http import McpHttpEndpoint
from hookgate.server import errors
from hookgate.server.limits import DEFAULT_MAX_BODY, BodySizeLimit
from hookgate.server.routes import catalog, confirmations, runs
from hookgate.server.runtime import Runtime

STATIC = Path(__file__).with_name("static")


def create_app(runtime: Runtime, *, keepalive_s: float = 15.0,
               max_body: int = DEFAULT_MAX_BODY) -> FastAPI:
    """An app serving ``runtime``; the runtime starts and stops with the app."""

    mcp = McpHttpEndpoint(runtime)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await runtime.start()
        try:
            async with mcp.running():
                yield
        finally:
            await runtime.stop()

    app = FastAPI(title="hookgate", version="0.1.0", lifespan=lifespan,
                  description="Hooks that make rules about an LLM agent's tool calls hold.")
    app.state.runtime = runtime
    app.state.mcp = mcp
    app.state.keepalive_s = keepalive_s
    errors.install(app)
    app.include_router(runs.router)
    app.include_router(confirmations.router)
    app.include_router(catalog.router)
    _include_optional_routes(app)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.include_router(mcp_routes.router)
    app.mount("/mcp", mcp, name="mcp")

    @app.get("/", include_in_schema=False)
    async def portal() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.add_middleware(BodySizeLimit, max_bytes=max_body)
    return app


def _include_optional_routes(app: FastAPI) -> None:
    # Routes of rooms that register themselves (channel callbacks, audit, orgs, workflows).
    from hookgate.server.routes import registry

    for router in registry.routers():
        app.include_router(router)
