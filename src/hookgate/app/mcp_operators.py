"""``/api/mcp/...``: the MCP gateway's downstream servers, for operators (admins only):
which run, how often each was started, and restarting one on demand. Mounted with the
gateway (app/mcp_gateway.py), so the MCP SDK is imported only when the configuration uses
it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request

from hookgate.mcp.errors import DownstreamError
from hookgate.mcp.gateway import GatewayRefusal, McpGateway
from hookgate.runtime.runtime import Caller
from hookgate.server.auth import CallerDep
from hookgate.server.responses import McpServer, McpServerRestarted

#: Operators' routes: the downstream servers and restarting one on demand (admins only).
router = APIRouter(prefix="/api/mcp", tags=["mcp"])


def _gateway(request: Request, caller: Caller) -> McpGateway:
    if not caller.admin:
        raise HTTPException(403, "only an admin manages the MCP gateway's servers")
    gateway = request.app.state.mcp.gateway
    if gateway is None:
        raise HTTPException(503, "the MCP gateway is not running")
    return gateway  # type: ignore[no-any-return]


@router.get("/servers", response_model=list[McpServer])
async def list_servers(request: Request, caller: CallerDep) -> list[dict[str, Any]]:
    """The downstream servers: running or not, and how often each was started."""
    gateway = _gateway(request, caller)
    return [{"id": s.id, "running": s.running, "starts": s.starts}
            for s in gateway.servers.values()]


@router.post("/servers/{server_id}/restart", response_model=McpServerRestarted)
async def restart_server(server_id: str, request: Request, caller: CallerDep
                         ) -> dict[str, Any]:
    """Stop the server (if running) and start it again; 502 with the reason if it fails."""
    gateway = _gateway(request, caller)
    try:
        await gateway.restart(server_id)
    except GatewayRefusal as exc:
        raise HTTPException(404, str(exc)) from None
    except DownstreamError as exc:
        raise HTTPException(502, str(exc)) from None
    server = gateway.servers[server_id]
    return {"id": server.id, "running": server.running, "starts": server.starts,
            "tools": [t.name for t in await server.tools()]}
