"""The HTTP headers a relayed JSON-RPC message carries to the gateway, read from the message
itself: a request of the per-request protocol (2026-07-28) repeats its version, method, name
and ``Mcp-Param-*`` values in headers, as the SDK's own client sends them. Works on the
decoded JSON as it is (no models): the relay passes every message through unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
    mcp_param_headers,
    x_mcp_header_map,
)
from mcp_types import PROTOCOL_VERSION_META_KEY

from hookgate.mcp.message_ids import id_key

__all__ = ["Envelope", "id_key"]


class Envelope:
    """The headers of the per-request protocol, and the ``Mcp-Param-*`` maps of the tools
    whose input schemas ask for them (learnt from the ``tools/list`` answers that pass by)."""

    def __init__(self) -> None:
        self.param_maps: dict[str, dict[tuple[str, ...], str]] = {}
        self._listings: set[str] = set()

    def headers_for(self, message: Mapping[str, Any]) -> dict[str, str]:
        """The headers ``message`` (client → gateway) must carry; none for a message of the
        handshake protocol (its session carries the version)."""
        method, params = message.get("method"), message.get("params")
        if not isinstance(method, str) or "id" not in message or not isinstance(params, Mapping):
            return {}
        if method == "tools/list":
            self._listings.add(id_key(message["id"]))
        meta = params.get("_meta")
        version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, Mapping) else None
        if not isinstance(version, str):
            return {}
        headers = {MCP_PROTOCOL_VERSION_HEADER: version, MCP_METHOD_HEADER: method}
        name_key = NAME_BEARING_METHODS.get(method)
        name: Any = params.get(name_key) if name_key is not None else None
        if isinstance(name, str):
            headers[MCP_NAME_HEADER] = encode_header_value(name)
        arguments = params.get("arguments")
        if method == "tools/call" and name in self.param_maps and isinstance(arguments, Mapping):
            headers.update(mcp_param_headers(self.param_maps[name], arguments))
        return headers

    def note(self, message: Mapping[str, Any]) -> None:
        """Learn from ``message`` (gateway → client): a tool listing's header maps."""
        if "id" not in message or "method" in message:
            return
        key = id_key(message["id"])
        if key not in self._listings:
            return
        self._listings.discard(key)
        result = message.get("result")
        tools = result.get("tools") if isinstance(result, Mapping) else None
        for tool in tools if isinstance(tools, list) else ():
            if isinstance(tool, Mapping) and isinstance(tool.get("name"), str):
                mapped = x_mcp_header_map(tool.get("inputSchema"))
                if mapped:
                    self.param_maps[tool["name"]] = mapped
