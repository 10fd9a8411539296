"""A downstream MCP server whose tools change while it runs.

``unlock`` adds the tool ``vault`` and tells the client the tool list changed. By default it
is the official SDK's `MCPServer` on the 2026-07-28 protocol (the change is an event on the
client's ``subscriptions/listen`` stream); with ``CHANGING_ERA=handshake`` it is a server
written from the 2025-06-18 protocol that sends ``notifications/tools/list_changed``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("changing")
OBJECT = {"type": "object", "properties": {}}
CODE = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}


@server.tool()
def ping() -> str:
    """Answers pong."""
    return "pong"


def vault(code: str) -> str:
    """Opens the vault (only there after unlock)."""
    return f"vault opened with {code}"


@server.tool()
async def unlock(ctx: Context) -> str:
    """Adds the tool vault and announces the change."""
    server.add_tool(vault)
    await ctx.notify_tools_changed()
    return "unlocked"


def handshake_server() -> None:
    tools = [{"name": "ping", "description": "Answers pong.", "inputSchema": OBJECT},
             {"name": "unlock", "description": "Adds vault.", "inputSchema": OBJECT}]

    def send(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    def text(value: str) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": value}]}

    for line in sys.stdin:
        msg = json.loads(line)
        method, params, msg_id = msg.get("method"), msg.get("params") or {}, msg.get("id")
        if msg_id is None:
            continue  # notifications
        result: dict[str, Any] | None = None
        if method == "initialize":
            result = {"protocolVersion": "2025-06-18", "serverInfo": {"name": "changing",
                                                                       "version": "1"},
                      "capabilities": {"tools": {"listChanged": True}}}
        elif method == "tools/list":
            result = {"tools": tools}
        elif method == "tools/call" and params.get("name") == "unlock":
            if len(tools) == 2:
                tools.append({"name": "vault", "description": "Opens the vault.",
                              "inputSchema": CODE})
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            result = text("unlocked")
        elif method == "tools/call" and params.get("name") == "vault" and len(tools) == 3:
            result = text(f"vault opened with {params['arguments']['code']}")
        elif method == "tools/call" and params.get("name") == "ping":
            result = text("pong")
        if result is None:
            send({"jsonrpc": "2.0", "id": msg_id,
                  "error": {"code": -32601, "message": f"no {method}"}})
        else:
            send({"jsonrpc": "2.0", "id": msg_id, "result": result})


if __name__ == "__main__":
    if os.environ.get("CHANGING_ERA") == "handshake":
        handshake_server()
    else:
        server.run("stdio")
