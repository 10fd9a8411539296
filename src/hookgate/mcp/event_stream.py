"""The messages of a ``text/event-stream`` answer, as the gateway's HTTP transport sends them.

aiohttp (the relay's HTTP client) reads bodies but has no event-stream parser; the format
(WHATWG server-sent events) is lines of ``field: value`` with a blank line ending each
event. Only ``data`` matters here: the gateway keeps no event store to resume from, so ids
and retry intervals have no use, and comments (keep-alive pings) carry nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp

#: The largest event taken (a tool's result may be large, not unbounded).
MAX_EVENT_BYTES = 256 * 1024 * 1024


class EventTooLarge(Exception):
    """An event grew past `MAX_EVENT_BYTES` without ending."""


async def event_data(body: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """The data of each complete event in ``body`` (its ``data`` lines joined by newlines);
    an event cut off by the end of the body is dropped, as the format says. Each byte is
    looked at once, however many chunks a long line (a large tool result) arrives in."""
    partial = bytearray()  # the line not ended yet
    data: list[bytes] = []
    held = 0  # bytes of the event so far: its data lines and the partial line
    async for chunk in body.iter_any():
        searched_from = len(partial)
        partial += chunk
        cut = partial.rfind(b"\n", searched_from)
        if cut < 0:
            if held + len(partial) > MAX_EVENT_BYTES:
                raise EventTooLarge(f"an event of more than {MAX_EVENT_BYTES} bytes")
            continue
        complete = bytes(partial[:cut])
        del partial[:cut + 1]
        for raw in complete.split(b"\n"):
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if not line:
                if data:
                    yield b"\n".join(data)
                    data, held = [], 0
                continue
            field, _, value = line.partition(b":")
            if field == b"data":
                data.append(value[1:] if value.startswith(b" ") else value)
                held += len(data[-1])
                if held > MAX_EVENT_BYTES:
                    raise EventTooLarge(f"an event of more than {MAX_EVENT_BYTES} bytes")
