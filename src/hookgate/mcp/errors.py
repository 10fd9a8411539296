"""What goes wrong between the gateway and a downstream MCP server, in words a user can act on."""

from __future__ import annotations


class DownstreamError(Exception):
    """A downstream MCP server did not start, crashed, timed out or answered nonsense.

    The message names the server and what happened; the call it belonged to did not
    produce a result (fail closed)."""

    def __init__(self, server_id: str, message: str) -> None:
        super().__init__(f"MCP server '{server_id}' {message}")
        self.server_id = server_id


class DownstreamToolError(Exception):
    """The downstream tool ran and reported an error (``isError`` in its result)."""
