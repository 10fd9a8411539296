"""What goes wrong between the gateway and a downstream MCP server, in words a user can act on."""

from __future__ import annotations


class DownstreamError(Exception):
    """A downstream MCP server did not start, crashed, timed out or answered nonsense.

    The message names the server and what happened; the call it belonged to did not
    produce a result (fail closed)."""

    def __init__(self, server_id: str, message: str, *, kind: str = "unavailable",
                 rpc_code: int | None = None) -> None:
        super().__init__(f"MCP server '{server_id}' {message}")
        self.server_id = server_id
        #: A short, low-cardinality name of the failure (``error.type`` on its span).
        self.kind = kind
        #: The JSON-RPC error code, when the server answered with one.
        self.rpc_code = rpc_code


class DownstreamToolError(Exception):
    """The downstream tool ran and reported an error (``isError`` in its result)."""
