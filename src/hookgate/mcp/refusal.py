"""Why ``hookgate mcp stdio`` does not serve, in one line: an MCP client shows the process's
stderr to its user. Light on purpose: the thin client imports it without the runtime."""

from __future__ import annotations

#: Where ``hookgate mcp stdio`` reads the user's API token.
TOKEN_ENV = "HOOKGATE_TOKEN"


class StdioRefusal(Exception):
    """The stdio gateway cannot serve: a missing or unknown token, an agent without access,
    a server it cannot reach, no usable secrets key or database; the message is one line
    saying what to fix."""


def one_line(message: str) -> str:
    """``message`` with its lines joined by "; " (stderr shows one line per failure)."""
    return "; ".join(line.strip() for line in message.splitlines() if line.strip())
