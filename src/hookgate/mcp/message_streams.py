"""The read and write streams of session messages that hookgate's own MCP transports hand
the SDK (a downstream server's pipes, a relay's socket): what each answers besides its own
``receive`` or ``send`` — iteration, closing and the async context."""

from __future__ import annotations

from typing import Self

import anyio
from mcp.shared.message import SessionMessage


class MessageReceiver:
    """A read stream: subclasses read the next message (or the error that says why a frame is
    not one) in ``receive`` and raise ``anyio.EndOfStream`` once it is over."""

    _ended = False

    async def receive(self) -> SessionMessage | Exception:
        raise NotImplementedError

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._ended = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class MessageSender:
    """A write stream: subclasses write one message in ``send``, and refuse once closed."""

    closed = False

    async def send(self, item: SessionMessage, /) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        self.closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
