"""The MCP gateway as a mount of the server: ``/mcp/{agent_id}`` and the operators' routes
when the configuration declares ``mcp_servers`` and the ``mcp`` extra is installed; else a
``/mcp`` that says in one line why there is no gateway. The MCP SDK is imported only when
the gateway is mounted (it costs most of a start-up)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, nullcontext

from fastapi import FastAPI, HTTPException

from hookgate.mcp.extra import INSTALL_HINT, mcp_installed
from hookgate.runtime.runtime import Runtime


class McpGatewayMount:
    """Mounts the gateway of ``runtime`` (or the one-line reason there is none)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def absent_because(self) -> str | None:
        if not self.runtime.deployment.mcp_servers:
            return "the configuration declares no mcp_servers"
        if not mcp_installed():
            return f"the MCP SDK is not installed ({INSTALL_HINT})"
        return None

    def install(self, app: FastAPI) -> AbstractAsyncContextManager[None]:
        why = self.absent_because()
        if why is not None:
            app.state.mcp = None

            @app.api_route("/mcp/{rest:path}", methods=["GET", "POST", "DELETE"],
                           include_in_schema=False)
            async def no_gateway(rest: str) -> None:
                raise HTTPException(404, f"this server has no MCP gateway: {why}")

            return nullcontext()
        from hookgate.app import mcp_operators
        from hookgate.mcp import http as mcp_routes
        from hookgate.mcp.oauth import METADATA_PREFIX

        endpoint = mcp_routes.McpHttpEndpoint(
            self.runtime, access_recheck_s=app.state.access_recheck_s)
        app.state.mcp = endpoint
        app.include_router(mcp_operators.router)
        app.mount("/mcp", endpoint, name="mcp")
        # RFC 9728: the gateway's OAuth protected-resource metadata (404 without mcp_oauth).
        app.mount(METADATA_PREFIX, endpoint.metadata, name="mcp-oauth-metadata")
        return endpoint.running()
