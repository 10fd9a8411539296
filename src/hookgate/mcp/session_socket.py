"""One MCP session over one WebSocket: how ``hookgate mcp stdio`` reaches the server.

The relay (hookgate.mcp.relay) opens ``ws(s)://…/mcp/{agent_id}`` with the user's bearer
token and passes its client's JSON-RPC messages through it, one message per WebSocket text
message, both ways. On the server the socket is a transport like stdin/stdout: the same MCP
server the stdio gateway runs serves the session (handshake or per-request protocol,
progress, elicitation, ``tools/list_changed``), with the principal signed in when the socket
opened and asked again every ``access_recheck_s`` seconds (once the token no longer signs in
as the same user of the same org, the socket closes and the user's waiting calls are
cancelled). One long-lived connection instead of an HTTP request per message: the hop costs
a WebSocket frame each way (docs/decisions/0010-relay-over-one-websocket.md).

Everything the HTTP gateway refuses is refused here the same way, before the socket is
accepted (the handshake answers 401/403/404 with the same one-line message); a message that
is not JSON-RPC is answered as the stdio transport answers it.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable

import anyio
import mcp_types as types
from mcp.server.runner import (  # the era's own loop: decision record 0022
    _PRE_REQUEST_REPLAY_LIMIT,
    _has_modern_envelope,
    _serve_modern_stream,
)
from mcp.shared.message import SessionMessage
from starlette.types import Receive, Send

from hookgate.mcp.gateway import McpGateway, Principal
from hookgate.mcp.message_streams import MessageReceiver, MessageSender
from hookgate.mcp.served import build_mcp_server
from hookgate.mcp.session_end import SessionEnd
from hookgate.runtime.access_watch import AccessEnded, while_allowed

log = logging.getLogger(__name__)

#: The close code when the caller's access ended (RFC 6455 §7.4.1: policy violation).
ACCESS_ENDED_CLOSE = 1008


async def refuse_socket(send: Send, status: int, message: str, challenge: str) -> None:
    """Refuse a WebSocket handshake with an HTTP answer (ASGI's ``websocket.http.response``
    extension, which uvicorn serves), else a plain close."""
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json")]
    if status in (401, 403):
        headers.append((b"www-authenticate", challenge.encode("latin-1", "replace")))
    try:
        await send({"type": "websocket.http.response.start", "status": status,
                    "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    except Exception:  # a server without the extension: the handshake fails without a body
        await send({"type": "websocket.close", "code": ACCESS_ENDED_CLOSE,
                    "reason": message[:120]})


async def serve_socket(gateway: McpGateway, who: Principal, receive: Receive, send: Send, *,
                       recheck_s: float, on_lost: Callable[[], Awaitable[None]]) -> None:
    """Serve the MCP session of an accepted-to-be socket until either side closes it."""
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    end = SessionEnd(who)
    server = build_mcp_server(gateway, lambda _ctx: end.checked())
    # The SDK's server reads and writes the socket itself: no task and no memory stream
    # between the socket and its dispatcher (decision record 0022).
    inbound = SocketMessages(receive)
    outbound = SocketSender(send)

    async def session() -> None:
        opening = await inbound.opening_request()
        if opening is None or opening.method == "initialize" \
                or not _has_modern_envelope(opening.params):
            # The handshake protocol: the SDK's own loop (it decides the era again, from
            # the same first request, and serves the session).
            await server.run(inbound, outbound, server.create_initialization_options())
            return
        # The 2026-07-28 protocol, decided as the SDK decides it, served by the SDK's
        # loop of that era without its relay of every later message through a stream.
        try:
            async with server.lifespan(server) as state:
                await _serve_modern_stream(server, inbound, outbound, lifespan_state=state,
                                           raise_exceptions=False)
        finally:
            await outbound.aclose()

    ended = False
    try:
        await while_allowed(session(), end.who.still_allowed, recheck_s,
                            on_lost=lambda: end.now(on_lost()))
    except AccessEnded as exc:
        ended = True
        log.warning("user %s: %s; the MCP socket closes", who.user_id, exc)
    if not inbound.closed_by_client:
        with contextlib.suppress(Exception):  # the client may be gone already
            await send({"type": "websocket.close",
                        "code": ACCESS_ENDED_CLOSE if ended else 1000,
                        "reason": "access ended" if ended else ""})


class SocketMessages(MessageReceiver):
    """The client's messages on the socket, as the SDK's read stream: each text (or binary)
    frame parsed as one JSON-RPC message; one that is not is handed on as the exception
    that says why (answered as the stdio transport answers it)."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self.closed_by_client = False
        self._ended = False
        #: Messages read ahead (up to the client's first request), served again first.
        self._again: deque[SessionMessage | Exception] = deque()

    async def opening_request(self) -> types.JSONRPCRequest | None:
        """The client's first request (None if the socket closed before one), read ahead
        and served again as the next messages with the few frames that came before it
        (as the SDK keeps them: at most `_PRE_REQUEST_REPLAY_LIMIT`, later ones dropped)."""
        while True:
            try:
                item = await self._next()
            except anyio.EndOfStream:
                return None
            request = item.message if isinstance(item, SessionMessage) and isinstance(
                item.message, types.JSONRPCRequest) else None
            if request is None and len(self._again) >= _PRE_REQUEST_REPLAY_LIMIT:
                continue
            self._again.append(item)
            if request is not None:
                return request

    async def receive(self) -> SessionMessage | Exception:
        if self._again:
            return self._again.popleft()
        return await self._next()

    async def _next(self) -> SessionMessage | Exception:
        while not self._ended:
            got = await self._receive()
            kind = got["type"]
            if kind == "websocket.disconnect":
                self.closed_by_client = self._ended = True
                break
            if kind != "websocket.receive":
                continue
            data = got.get("text")
            if data is None:
                data = got.get("bytes") or b""
            try:
                parsed = types.jsonrpc_message_adapter.validate_json(data, by_name=False)
            except Exception as exc:
                return exc
            return SessionMessage(parsed)
        raise anyio.EndOfStream


class SocketSender(MessageSender):
    """The server's messages onto the socket, as the SDK's write stream: each one text
    frame, sent at once (a frame is written whole, so writers never interleave)."""

    def __init__(self, send: Send) -> None:
        self._send = send

    async def send(self, item: SessionMessage, /) -> None:
        if self.closed:
            raise anyio.ClosedResourceError
        text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        try:
            await self._send({"type": "websocket.send", "text": text})
        except Exception as exc:  # the client went away: as a closed stream says it
            raise anyio.BrokenResourceError from exc
