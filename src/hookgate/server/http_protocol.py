"""uvicorn's httptools protocol with a bound on a request's head.

httptools parses HTTP/1.1 in compiled code, which takes about 15 % of the server's CPU per
run off uvicorn's pure-Python default, h11. h11 refuses a request line and headers over
16 KiB; httptools and uvicorn's protocol on top of it keep whatever arrives, so a client
could make the server hold a header of any size. This protocol keeps h11's bound: a head
over ``MAX_HEAD_BYTES`` is answered ``431 Request Header Fields Too Large`` and the
connection closed, before any application code sees the request.

Two checks: a complete head is measured from what the parser reported (the target and
every header, exactly); a head still incomplete after a read is measured by the bytes read
since it began, so a header that never ends is cut off once that many bytes are held.

A response of known length goes out in one write: uvicorn writes its head (status line and
headers) and then its body, two ``send()`` calls, two TCP segments and two wake-ups of the
client, which reads the head alone and waits again. The head of a response whose
``content-length`` is over 0 (not to a ``HEAD``) is held until its first body part and
written with it (``HeadWithBody``). A streamed response (chunked: the event streams) is
written once per turn of the event loop: its head and the parts sent in the same turn (a
run's events already logged when its stream opens, its last events with the stream's end)
are joined into one write at the end of that turn, so nothing waits for a later event; a
part sent in a later turn goes out at the end of that one (decision record 0045). An
interim ``100 Continue`` is written as it comes.

When the server starts to stop, a response still streaming (an event stream, which would
otherwise hold the shutdown for its whole grace period) is told through the callbacks it
registered in its scope (``server/sse.py``, ``ON_SERVER_STOP``) and ends cleanly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from hookgate.server.sse import ON_SERVER_STOP

#: The largest request line plus headers accepted (h11's default, which uvicorn used before).
MAX_HEAD_BYTES = 16 * 1024
#: How long a refused connection's further bytes are read and dropped before it closes.
LINGER_S = 1.0
#: The most bytes of a streamed response held for its turn's one write (asyncio's default
#: high-water mark of a transport's write buffer).
STREAM_HELD_BYTES = 64 * 1024
#: The request line's fixed part (method, spaces, "HTTP/1.1", CRLF), counted as its most.
_LINE_OVERHEAD = 32
_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
              b"content-type: text/plain; charset=utf-8\r\n"
              b"content-length: 39\r\nconnection: close\r\n\r\n"
              b"the request's headers are over 16 KiB.\n")


class HeadTooLarge(Exception):
    """Stops the parser: the request's head is over the bound."""


class HeadWithBody:
    """The transport one request's response is written to: the head of a response of known,
    non-zero length is held and written together with the first part of its body; a
    streamed (chunked) response's writes are joined per turn of the event loop.

    uvicorn's cycle writes the head once it marked the response started and read its
    framing (``chunked_encoding``, ``expected_content_length``); a head written then with
    a body to follow is held. If no body follows (the app failed after starting its
    answer: uvicorn closes the connection), the held head is dropped with the connection,
    as a cut-off answer would have been.

    A stream's head and parts are kept in order and written together by a callback the
    first of them schedules (``loop.call_soon``), which runs before anything the turn
    scheduled after it, such as the next pipelined request's task. They are written at once
    when they reach ``STREAM_HELD_BYTES`` (so the transport's flow control sees a long
    burst as before) and before the connection is closed through this object."""

    __slots__ = ("_cycle", "_head", "_head_written", "_held", "_held_bytes", "_loop",
                 "_stream", "_transport")

    def __init__(self, transport: asyncio.Transport, cycle: RequestResponseCycle,
                 loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._cycle = cycle
        self._loop = loop
        self._head: bytes | None = None
        self._head_written = False
        self._stream = False
        self._held: list[bytes] = []
        self._held_bytes = 0

    def write(self, data: bytes) -> None:
        if self._stream:
            self._hold(data)
            return
        head = self._head
        if head is not None:  # the body's first part
            self._head = None
            self._transport.write(head + data)
            return
        cycle = self._cycle
        if not self._head_written and cycle.response_started:  # the head
            self._head_written = True
            if cycle.chunked_encoding:
                self._stream = True
                self._hold(data)
                return
            if (cycle.chunked_encoding is False and cycle.expected_content_length > 0
                    and cycle.scope["method"] != "HEAD"):
                self._head = data
                return
        self._transport.write(data)

    def _hold(self, data: bytes) -> None:
        held = self._held
        if not held:
            self._loop.call_soon(self._flush)
        held.append(data)
        self._held_bytes += len(data)
        if self._held_bytes >= STREAM_HELD_BYTES:
            self._flush()

    def _flush(self) -> None:
        held = self._held
        if not held:
            return  # written early (a long burst, or the connection closed through us)
        data = held[0] if len(held) == 1 else b"".join(held)
        held.clear()
        self._held_bytes = 0
        if not self._transport.is_closing():
            self._transport.write(data)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def close(self) -> None:
        self._head = None
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol refusing heads over ``MAX_HEAD_BYTES`` with a 431."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # a connection starts with a request's head
        self._head_read = 0
        self._refused = False

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        super().data_received(data)
        if self._refused:
            return
        if not self._in_head:
            self._head_read = 0
            return
        self._head_read += len(data)
        if self._head_read > MAX_HEAD_BYTES:
            self._refuse()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_read = 0
        extensions: dict[str, Any] = {ON_SERVER_STOP: []}
        self.scope["extensions"] = extensions

    def shutdown(self) -> None:
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            extensions: dict[str, Any] = cycle.scope.get("extensions") or {}
            callbacks: list[Callable[[], None]] = extensions.get(ON_SERVER_STOP, [])
            for stop in list(callbacks):
                stop()
        super().shutdown()

    def on_headers_complete(self) -> None:
        size = len(self.url) + _LINE_OVERHEAD + sum(len(n) + len(v) + 4 for n, v in self.headers)
        if size > MAX_HEAD_BYTES:
            self._refuse()
            raise HeadTooLarge  # the parser stops; nothing of this request runs
        self._in_head = False
        before = self.cycle
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle is not before and self.transport is not None:
            cycle.transport = HeadWithBody(  # type: ignore[assignment]
                self.transport, cycle, self.loop)

    def send_400_response(self, msg: str) -> None:
        if not self._refused:  # a refused head reaches uvicorn as a parser error too
            super().send_400_response(msg)

    def _refuse(self) -> None:
        self._refused = True
        self.logger.warning("Request head over %d bytes refused (431).", MAX_HEAD_BYTES)
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.write(_TOO_LARGE)
        # Closing now, with the client's bytes still unread, would reset the connection
        # and could destroy the answer in flight: end the sending side, read and drop what
        # still comes for a moment (data_received ignores it), then close.
        if transport.can_write_eof():
            transport.write_eof()
        self.loop.call_later(LINGER_S, transport.close)
