"""Whether a lasting MCP session's caller lost access (the stdio gateway, the relay's
WebSocket). From the first moment any check finds it — the session's own periodic check or a
waiting call's check of its caller — every request still reaching the session is refused
before anything is read for it (one sent while the session closes, say right after the
waiting call's "lost access" answer). An HTTP session needs none of this: each of its
requests signs in again."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable

from mcp import MCPError
from mcp_types import INVALID_REQUEST

from hookgate.mcp.gateway import Principal
from hookgate.runtime.access_watch import StillAllowed

__all__ = ["SessionEnd"]

LOST = ("the caller's access ended (token revoked or expired, user disabled, removed or "
        "moved to another org); the MCP session ends")


class SessionEnd:
    """The session's principal (``who``), whose every access check latches a loss."""

    def __init__(self, who: Principal) -> None:
        self.lost = False
        asked = who.still_allowed
        self.who = who if asked is None else dataclasses.replace(
            who, still_allowed=self._latching(asked))

    def _latching(self, asked: StillAllowed) -> StillAllowed:
        async def still_allowed() -> bool:
            try:
                allowed = await asked()
            except Exception:  # fail closed: a check that cannot answer ends the session
                self.lost = True
                raise
            if not allowed:
                self.lost = True
            return allowed
        return still_allowed

    async def now(self, cancel_waits: Awaitable[None]) -> None:
        """Access is lost: refuse from now on, then end the calls waiting for a person."""
        self.lost = True
        await cancel_waits

    def checked(self) -> Principal:
        """The principal for a request, unless the session's caller lost access."""
        if self.lost:
            raise MCPError(INVALID_REQUEST, LOST)
        return self.who
