"""``hookgate mcp stdio``'s one connection to the server: the client's messages over a
WebSocket (the server side is hookgate.mcp.session_socket).

Each line the client writes on stdin is one text message to ``ws(s)://…/mcp/{agent}``; each
message from the server is one line on stdout (compact JSON has no line break inside; one
that has is re-encoded, so a message never becomes two). The relay remembers the requests
the server has not answered yet: if the socket closes under them (the server stopped), each
gets a JSON-RPC error naming the server, and the relay goes on over plain HTTP requests
(`hookgate.mcp.relay.Relay`), as it does from the start against a server that offers no
socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any, Literal

import aiohttp

from hookgate.mcp.event_stream import MAX_EVENT_BYTES
from hookgate.mcp.message_ids import id_key
from hookgate.mcp.pipes import LineWriter
from hookgate.mcp.refusal import one_line

log = logging.getLogger(__name__)

def socket_url(url: str) -> str:
    """``ws://host/mcp/agent`` for ``http://host/mcp/agent`` (``wss`` for ``https``)."""
    return "ws" + url[4:] if url.startswith("http") else url


#: A client socket that hands text messages over as bytes (``decode_text=False``).
Socket = aiohttp.ClientWebSocketResponse[Literal[False]]


async def open_socket(http: aiohttp.ClientSession, url: str) -> Socket | None:
    """The server's socket for this gateway, or None when it offers none (an older server,
    or one started without the MCP gateway's sockets): the relay then posts each message."""
    try:
        # A message from the server may be as large as an event the HTTP relay takes (a
        # tool's result); the server bounds what the client sends, as it bounds a body.
        return await http.ws_connect(socket_url(url), max_msg_size=MAX_EVENT_BYTES,
                                     decode_text=False, heartbeat=30.0, autoping=True)
    except aiohttp.WSServerHandshakeError as exc:
        log.info("hookgate at %s offers no MCP socket (%s): relaying over HTTP", url,
                 exc.status)
    except (aiohttp.ClientError, TimeoutError) as exc:
        log.info("the MCP socket at %s did not open (%s): relaying over HTTP", url,
                 one_line(str(exc)) or type(exc).__name__)
    return None


class SocketRelay:
    """One client's messages to the server over ``socket``, and the server's back to ``out``."""

    def __init__(self, socket: Socket, url: str,
                 out: LineWriter) -> None:
        self.socket, self.url, self.out = socket, url, out
        #: Requests sent and not answered yet, by id key: their ids as the client wrote them.
        self.pending: dict[str, Any] = {}
        self.reader = asyncio.ensure_future(self._downward())

    @property
    def open(self) -> bool:
        return not self.reader.done()

    async def upward(self, body: bytes, message: dict[str, Any]) -> bool:
        """Send one message the client wrote (``body``, parsed as ``message``); False when
        the socket is closed (the caller relays it another way)."""
        if not self.open:
            return False
        if "id" in message and isinstance(message.get("method"), str):
            self.pending[id_key(message["id"])] = message["id"]
        try:
            await self.socket.send_frame(body, aiohttp.WSMsgType.TEXT)
        except (aiohttp.ClientError, ConnectionError, RuntimeError):
            await self._closed()  # answers this request too: it was sent nowhere
            return True
        if not self.open:  # closed while sending: answer what it will never answer
            await self._closed()
        return True

    async def _downward(self) -> None:
        try:
            async for frame in self.socket:
                if frame.type not in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                    continue
                data: bytes = frame.data.strip()
                try:
                    message = json.loads(data)
                except ValueError:
                    log.warning("hookgate mcp stdio: the server sent a message that is not "
                                "JSON")
                    continue
                if not isinstance(message, dict):
                    continue
                if "method" not in message and "id" in message:
                    self.pending.pop(id_key(message["id"]), None)
                if b"\n" in data or b"\r" in data:
                    data = json.dumps(message).encode()
                await self.out.write(data + b"\n")
        finally:
            await self._closed()

    async def _closed(self) -> None:
        # Whatever was asked and not answered is answered now: the client is not left
        # waiting on a connection that is gone.
        pending, self.pending = self.pending, {}
        if not pending:
            return
        from mcp_types import CONNECTION_CLOSED  # the SDK, loaded only when it is needed

        code = self.socket.close_code
        for request_id in pending.values():
            await self.out.write(json.dumps({
                "jsonrpc": "2.0", "id": request_id,
                "error": {"code": CONNECTION_CLOSED,
                          "message": f"the connection to hookgate at {self.url} closed "
                                     f"({code or 'no close code'}) before it answered"},
            }).encode() + b"\n")

    async def aclose(self) -> None:
        with contextlib.suppress(aiohttp.ClientError, ConnectionError, RuntimeError):
            await self.socket.close()
        self.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.reader
