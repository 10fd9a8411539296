"""The relay's reader of the gateway's event streams: events split across any chunking come
out whole, a long data line arriving in many chunks is read once, and an event larger than
the limit is refused whether it is one long line or many short ones."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from hookgate.mcp import event_stream
from hookgate.mcp.event_stream import EventTooLarge, event_data


class Body:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def iter_any(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


async def read(chunks: list[bytes]) -> list[bytes]:
    return [d async for d in event_data(Body(chunks))]  # type: ignore[arg-type]


STREAM = (b": ping\r\n\r\nevent: message\r\ndata: {\"a\":1}\r\n\r\n"
          b"data: line one\r\ndata:line two\r\nid: 7\r\n\r\ndata: cut off")


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, len(STREAM)])
async def test_events_come_out_whole_however_the_stream_is_chunked(size: int) -> None:
    chunks = [STREAM[i:i + size] for i in range(0, len(STREAM), size)]
    assert await read(chunks) == [b'{"a":1}', b"line one\nline two"]


async def test_a_long_line_in_many_chunks_is_one_event() -> None:
    payload = b"x" * 300_000
    stream = b"data: " + payload + b"\n\n"
    chunks = [stream[i:i + 1000] for i in range(0, len(stream), 1000)]
    assert await read(chunks) == [payload]


@pytest.mark.parametrize("stream", [
    b"data: " + b"x" * 200 + b"\n\n",                       # one long line, never ended
    b"".join(b"data: xxxxxxxxxx\n" for _ in range(30)) + b"\n",  # many short lines
])
async def test_an_event_past_the_limit_is_refused(stream: bytes, monkeypatch: Any) -> None:
    monkeypatch.setattr(event_stream, "MAX_EVENT_BYTES", 100)
    chunks = [stream[i:i + 16] for i in range(0, len(stream), 16)]
    with pytest.raises(EventTooLarge):
        await read(chunks)
