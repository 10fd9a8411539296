"""Telling the gateway's connected clients that their tool list changed.

Clients on the 2026-07-28 protocol hear it on their ``subscriptions/listen`` stream (the SDK's
bus and listen handler); handshake-era sessions that listed tools get
``notifications/tools/list_changed`` on their standalone stream. The event names no tools, so
a client whose agent does not reach the changed server merely lists the same tools again.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

log = logging.getLogger(__name__)

#: Handshake-era sessions remembered for announcements (the oldest are forgotten first; a
#: session that ended only drops what is sent to it).
MAX_SESSIONS = 1024


class ToolChangeAnnouncer:
    """Who to tell that the tools changed, and the telling."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        self._sessions: OrderedDict[str, ServerSession] = OrderedDict()

    def watch(self, ctx: ServerRequestContext[Any, Any], session_key: str | None) -> None:
        """Remember a handshake-era session that listed tools (modern ones listen)."""
        if session_key is None or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        self._sessions[session_key] = ctx.session
        self._sessions.move_to_end(session_key)
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)

    async def announce(self, server_id: str) -> None:
        await self.bus.publish(ToolsListChanged())
        for key, session in list(self._sessions.items()):
            try:
                await session.send_tool_list_changed()
            except Exception as exc:  # that client went away: forget it
                log.debug("tools/list_changed not delivered to session %s: %s", key, exc)
                self._sessions.pop(key, None)
