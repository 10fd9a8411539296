"""The FastAPI application: the HTTP API of SPEC §6 and the web portal at ``/``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from pathlib import Path

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from hookgate.server import errors
from hookgate.server.limits import DEFAULT_MAX_BODY, BodySizeLimit
from hookgate.server.routes import catalog, confirmations, runs
from hookgate.server.runtime import Runtime

STATIC = Path(__file__).with_name("static")


def create_app(runtime: Runtime, *, keepalive_s: float = 15.0,
               max_body: int = DEFAULT_MAX_BODY) -> FastAPI:
    """An app serving ``runtime``; the runtime starts and stops with the app."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await runtime.start()
        try:
            async with mcp_running:
                yield
        finally:
            await runtime.stop()

    app = FastAPI(title="hookgate", version="0.1.0", lifespan=lifespan,
                  description="Hooks that make rules about an LLM agent's tool calls hold.")
    mcp_running = _mount_mcp(app, runtime)
    app.state.runtime = runtime
    app.state.keepalive_s = keepalive_s
    errors.install(app)
    app.include_router(runs.router)
    app.include_router(confirmations.router)
    app.include_router(catalog.router)
    _include_optional_routes(app)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

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


def _mount_mcp(app: FastAPI, runtime: Runtime) -> AbstractAsyncContextManager[None]:
    """The MCP gateway's routes (``/mcp/{agent_id}``, ``/api/mcp/...``) when the
    configuration declares ``mcp_servers``; its lifespan part. Without them the MCP SDK is
    not even imported (it costs most of a start-up) and ``/mcp`` says why it is absent."""
    if not runtime.deployment.mcp_servers:
        app.state.mcp = None

        @app.api_route("/mcp/{rest:path}", methods=["GET", "POST", "DELETE"],
                       include_in_schema=False)
        async def no_gateway(rest: str) -> None:
            raise HTTPException(404, "this server has no MCP gateway: the configuration "
                                     "declares no mcp_servers")

        return nullcontext()
    from hookgate.mcp import http as mcp_routes  # the MCP SDK, only when it is used

    mcp = mcp_routes.McpHttpEndpoint(runtime)
    app.state.mcp = mcp
    app.include_router(mcp_routes.router)
    app.mount("/mcp", mcp, name="mcp")
    return mcp.running()
