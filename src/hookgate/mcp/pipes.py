"""The stdio transport's lines, read and written on the event loop: stdin and stdout as
non-blocking pipes (no thread hop per message), or through a worker thread when they are
not pipes (a file, a terminal that the loop cannot watch).
"""

from __future__ import annotations

import asyncio
import sys
from typing import BinaryIO

#: The longest message line taken from the client (a tool's arguments may be large).
MAX_LINE_BYTES = 256 * 1024 * 1024


class LineReader:
    """Newline-delimited messages from a binary stream."""

    def __init__(self, stream: BinaryIO | None = None) -> None:
        self.stream = stream or sys.stdin.buffer
        self._reader: asyncio.StreamReader | None = None

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        try:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                         self.stream)
        except (ValueError, OSError):
            return  # not a pipe: read in a thread
        self._reader = reader

    async def readline(self) -> bytes:
        """The next line (with its newline), b"" at the end of the stream."""
        if self._reader is None:
            return await asyncio.to_thread(self.stream.readline)
        try:
            return await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as end:
            return end.partial


class LineWriter:
    """Writes whole lines, each at once, so concurrent writers never interleave."""

    def __init__(self, stream: BinaryIO | None = None) -> None:
        self.stream = stream or sys.stdout.buffer
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.connect_write_pipe(
                lambda: asyncio.streams.FlowControlMixin(), self.stream)
        except (ValueError, OSError):
            return  # not a pipe: blocking writes (each line is small)
        self._writer = asyncio.StreamWriter(transport, protocol, None, loop)

    async def write(self, line: bytes) -> None:
        if self._writer is None:
            self.stream.write(line)
            self.stream.flush()
            return
        self._writer.write(line)
        await self._writer.drain()
