"""A JSON-RPC message's id as a key: the relay's two connections (hookgate.mcp.relay and
hookgate.mcp.relay_socket) and the per-request envelope match answers to requests by it.
Imports nothing: the relay's socket path loads no MCP SDK."""

from __future__ import annotations

from typing import Any


def id_key(request_id: Any) -> str:
    """A JSON-RPC id as a dict key that keeps ``1`` and ``"1"`` apart."""
    return f"{type(request_id).__name__}:{request_id}"
