"""Server-Sent Events responses: a run's events and the inbox's changes, streamed live.

A stream writes each event as it comes, a comment line (``: ping``) every ``ping_s``
seconds so proxies keep an idle stream open, and ends when its events end, when the client
goes away (its events' generator is closed, so what it registered is dropped at once) or
when the server stops: ``hookgate serve``'s HTTP protocol (``server/http_protocol.py``)
calls the callbacks a stream registered under :data:`ON_SERVER_STOP` in the request's
ASGI scope, so a stream ends cleanly instead of holding the shutdown for its grace period.
A stream given ``still_allowed`` also ends as soon as its caller may no longer see it: asked
before each event (an answer the token cache holds, so no database read per event) and every
``recheck_s`` seconds on a timer of its own, so an idle stream ends too.

One stream costs one task beside the request's own (it waits for the client's disconnect)
and one timer for the pings (one more for the access re-check, which reads the token cache, not
the database, unless the cache's entry is older than its two seconds): every write is one ASGI
message, written to the socket whole, so pings and events need no lock between them.
(sse-starlette, used before, ran four tasks per stream in an anyio task group and a cancel
scope per write: under load about a tenth of the server's CPU, for runs whose streams last a
few milliseconds.)
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from hookgate.runtime.access_watch import StillAllowed, asked

#: The key, in a request scope's ``extensions``, of the list of callbacks that the server
#: calls when it starts to stop with the request's response still streaming.
ON_SERVER_STOP = "hookgate.on_server_stop"


_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"x-accel-buffering", b"no"),  # nginx: pass each event on at once
]
_PING = b": ping\r\n\r\n"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class Event:
    """One event: ``data`` may hold line breaks (each line becomes a ``data:`` field)."""

    data: str
    event: str | None = None
    id: str | None = None

    def encode(self) -> bytes:
        head = "" if self.id is None else f"id: {_one_line(self.id)}\r\n"
        if self.event is not None:
            head += f"event: {_one_line(self.event)}\r\n"
        data = self.data
        # Only CR, LF and CRLF end a line in SSE: str.splitlines would also split at
        # U+2028 and others, which JSON text may hold inside its strings. JSON text written
        # without indentation has no line break at all: one data field, no split.
        if "\r" in data or "\n" in data:
            data = "\r\ndata: ".join(_LINE_BREAK.split(data))
        # A lone surrogate (JSON text can carry one from a hostile model) cannot be UTF-8:
        # written as its escape, it stays the same string to a JSON reader.
        return f"{head}data: {data}\r\n\r\n".encode("utf-8", "backslashreplace")


def _one_line(value: str) -> str:
    # A field's value ends at the first line break: one there would start a field the
    # event's author never wrote.
    return value.replace("\r", " ").replace("\n", " ")


class EventStreamResponse(Response):
    """An ASGI response streaming ``events`` as Server-Sent Events (see the module doc)."""

    media_type = "text/event-stream"

    def __init__(self, events: AsyncIterator[Event], *, ping_s: float,
                 still_allowed: StillAllowed | None = None, recheck_s: float = 2.0) -> None:
        # Response's own __init__ renders a body; a stream has none.
        if not ping_s > 0:
            raise ValueError(f"ping_s must be a positive number of seconds, not {ping_s!r}")
        if not recheck_s > 0:
            raise ValueError(f"recheck_s must be a positive number of seconds, not "
                             f"{recheck_s!r}")
        self.events = events
        self.ping_s = ping_s
        self.still_allowed = still_allowed
        self.recheck_s = recheck_s
        self.status_code = 200
        self.background = None
        self.raw_headers = list(_HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        assert task is not None
        # Why the stream was cut short: "disconnect", "stop" or "access" (its caller's gone).
        cut: list[str] = []
        streaming = True

        def cut_short(reason: str) -> None:
            if streaming and not cut:
                cut.append(reason)
                task.cancel()

        loop = asyncio.get_running_loop()
        watcher = loop.create_task(_await_disconnect(receive, cut_short))
        stop_callbacks: list[Callable[[], None]] | None = (
            scope.get("extensions") or {}).get(ON_SERVER_STOP)

        def on_stop() -> None:
            cut_short("stop")

        if stop_callbacks is not None:
            stop_callbacks.append(on_stop)
        pinger = _Pinger(loop, send, self.ping_s)
        allowed = self.still_allowed
        recheck = None if allowed is None else _Recheck(
            loop, allowed, self.recheck_s, lambda: cut_short("access"))
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": self.raw_headers})
            async for event in self.events:
                if allowed is not None and not await asked(allowed):
                    break  # not one event more for a caller who lost access
                await send({"type": "http.response.body", "body": event.encode(),
                            "more_body": True})
                pinger.wrote()
        except asyncio.CancelledError:
            # Ours (a disconnect or a stop) ends the stream; one from outside (the
            # server's grace period ran out) goes on.
            if not cut or task.uncancel() > 0:
                raise
        else:
            if cut:  # the generator swallowed our cancellation and ended
                task.uncancel()
        finally:
            streaming = False
            pinger.close()
            if recheck is not None:
                recheck.close()
            watcher.cancel()
            if stop_callbacks is not None:
                with contextlib.suppress(ValueError):
                    stop_callbacks.remove(on_stop)
            await _close(self.events)
        if cut != ["disconnect"]:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        if self.background is not None:  # as any Starlette response: after the body
            await self.background()


async def _await_disconnect(receive: Receive, cut: Callable[[str], None]) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            cut("disconnect")
            return


async def _close(events: AsyncIterator[Any]) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()


class _Recheck:
    """Asks ``still_allowed`` every ``every`` seconds; calls ``lost`` once it says no."""

    def __init__(self, loop: asyncio.AbstractEventLoop, still_allowed: StillAllowed,
                 every: float, lost: Callable[[], None]) -> None:
        self._loop, self._still_allowed, self._every, self._lost = (
            loop, still_allowed, every, lost)
        self._asking: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = loop.call_later(every, self._due)

    def _due(self) -> None:
        if self._asking is None:
            self._asking = self._loop.create_task(self._ask())
        self._timer = self._loop.call_later(self._every, self._due)

    async def _ask(self) -> None:
        try:
            if not await asked(self._still_allowed):
                self._lost()
        finally:
            self._asking = None

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._asking is not None:
            self._asking.cancel()


class _Pinger:
    """Writes a comment every ``every`` seconds in which nothing else was written."""

    def __init__(self, loop: asyncio.AbstractEventLoop, send: Send, every: float) -> None:
        self._loop, self._send, self._every = loop, send, every
        self._last = loop.time()
        self._sending: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = loop.call_at(self._last + every, self._due)

    def wrote(self) -> None:
        self._last = self._loop.time()

    def _due(self) -> None:
        now = self._loop.time()
        if now - self._last >= self._every and self._sending is None:
            self._sending = self._loop.create_task(self._ping())
            self._last = now
        self._timer = self._loop.call_at(self._last + self._every, self._due)

    async def _ping(self) -> None:
        try:
            await self._send({"type": "http.response.body", "body": _PING, "more_body": True})
        except Exception:
            pass  # a broken connection: the client's disconnect ends the stream
        finally:
            self._sending = None

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._sending is not None:
            self._sending.cancel()
