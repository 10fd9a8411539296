"""A raw client of the gateway's MCP socket for the attack tests: JSON-RPC frames sent as
they are written, and the answer to one request read past the notifications."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

#: Far beyond what an answer takes, for a busy machine.
ANSWER_WITHIN_S = 20


class Session:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws

    async def send(self, message: Any) -> None:
        await self.ws.send_str(json.dumps(message))

    async def answer(self, request_id: Any) -> dict[str, Any]:
        """The server's answer to ``request_id`` (notifications in between are skipped)."""
        async with asyncio.timeout(ANSWER_WITHIN_S):
            while True:
                frame = await self.ws.receive()
                if frame.type != aiohttp.WSMsgType.TEXT:
                    raise AssertionError(f"the socket ended: {frame.type} {frame.data}")
                message = json.loads(frame.data)
                if message.get("id") == request_id and "method" not in message:
                    return dict(message)
