"""A downstream MCP server over its stdin/stdout, as the SDK client's transport, read and
written by the client's own tasks: no reader or writer task and no memory stream between
the process's pipes and the client's dispatcher (decision record 0022).

The process is started, stopped and its lines parsed by the SDK's own stdio helpers, as
``mcp.client.stdio.stdio_client`` does: only the two hops per message are gone. The answers
to ``tools/call`` requests written directly (`hookgate.mcp.pipe_calls`) go to their waiters
instead of the dispatcher, once parsed by the same helper.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import logging
import sys
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream
from mcp import StdioServerParameters
from mcp.client._transport import TransportStreams
from mcp.client.stdio import (
    _create_platform_compatible_process,
    _drain_stdout,
    _get_executable_command,
    _parse_line,
    _stop_server_process,
    get_default_environment,
)
from mcp.shared.message import SessionMessage

from hookgate.mcp.message_streams import MessageReceiver, MessageSender
from hookgate.mcp.pipe_calls import Answers

log = logging.getLogger(__name__)


@asynccontextmanager
async def stdio_server_pipes(server: StdioServerParameters) -> AsyncIterator[TransportStreams]:
    """Start ``server``'s process; its stdout is the read stream, its stdin the write stream.
    On the way out its stdin is closed and the process stopped as the SDK stops it (a grace,
    then the process tree is killed)."""
    command = await _get_executable_command(server.command)
    process = await _create_platform_compatible_process(
        command=command, args=server.args, env=get_default_environment() | (server.env or {}),
        errlog=sys.stderr, cwd=server.cwd)
    assert process.stdout is not None and process.stdin is not None
    lines = ServerLines(process.stdout, server.encoding, server.encoding_error_handler)
    writer = ServerInput(process.stdin, lines, server.encoding, server.encoding_error_handler)
    try:
        yield lines, writer
    finally:
        lines.answers.close()
        with anyio.CancelScope(shield=True):
            writer.closed = True
            async with anyio.create_task_group() as tg:
                # A server stuck writing its stdout cannot read the end of its stdin.
                tg.start_soon(_drain_stdout, process)
                await _stop_server_process(process)
                tg.cancel_scope.cancel()


class ServerLines(MessageReceiver):
    """The server's stdout, one JSON-RPC message per line, read when the client asks for
    the next one (no read-ahead). A line that is not a message is handed on as the error
    that says why, as the SDK's transport hands it on."""

    def __init__(self, stdout: ByteReceiveStream, encoding: str, errors: str) -> None:
        self._stdout = stdout
        self._encoding = encoding
        self._decoder = codecs.getincrementaldecoder(encoding)(errors)
        self._buffer = ""
        self._lines: deque[str] = deque()
        self._ended = False
        #: The direct requests waiting for their answers (`hookgate.mcp.pipe_calls`).
        self.answers = Answers()

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._next()
            if not (self.answers and isinstance(item, SessionMessage)
                    and self.answers.take(item.message)):
                return item

    async def _next(self) -> SessionMessage | Exception:
        while not self._lines:
            if self._ended:
                self.answers.close()
                raise anyio.EndOfStream
            try:
                chunk = await self._stdout.receive()
                text = self._buffer + self._decoder.decode(chunk)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError,
                    ConnectionError):
                self._ended = True
                self.answers.close()
                raise anyio.EndOfStream from None
            except UnicodeDecodeError as exc:  # the connection cannot go on: it ends
                log.warning("an MCP server wrote bytes that are not %s text (%s): its "
                            "connection ends", self._encoding, exc)
                self._ended = True
                self.answers.close()
                raise anyio.EndOfStream from None
            *complete, self._buffer = text.split("\n")
            self._lines.extend(complete)
        line = self._lines.popleft()
        if ("NaN" in line or "Infinity" in line) and _has_non_json_number(line):
            # JSON has no NaN or Infinity; the SDK's parser takes them (and they would
            # reach the client as null): refused as a line that is not a message.
            log.warning("an MCP server sent NaN or Infinity, which JSON does not have: "
                        "the message is dropped")
            return ValueError("a message with NaN or Infinity, which JSON does not have")
        return _parse_line(line)

    async def end(self) -> None:
        """End the stream: a read waiting now, and every later one, meets its end."""
        self._ended = True
        self.answers.close()
        await self._stdout.aclose()



def _has_non_json_number(line: str) -> bool:
    # Only for the rare line that names them: the strict parse costs a second pass.
    def refuse(constant: str) -> Any:
        raise ValueError(constant)

    try:
        json.loads(line, parse_constant=refuse)
    except ValueError:
        return True
    except RecursionError:
        return False  # nested too deep: the SDK's parser refuses it on its own
    return False


class ServerInput(MessageSender):
    """The server's stdin: each message one line, written by the task that sends it."""

    def __init__(self, stdin: ByteSendStream, lines: ServerLines, encoding: str,
                 errors: str) -> None:
        self._stdin = stdin
        #: The asyncio writer under anyio's stream, when it is one (asyncio's loop).
        self._writer = _asyncio_writer(stdin)
        self._lines = lines
        self._encoding, self._errors = encoding, errors
        self.closed = False

    @property
    def writes_directly(self) -> bool:
        """Whether messages go to the pipe's asyncio writer itself (else through anyio's
        stream, for a backend or an anyio that keeps no such writer)."""
        return self._writer is not None

    async def send(self, item: SessionMessage, /) -> None:
        await self.send_line(item.message.model_dump_json(by_alias=True, exclude_unset=True))

    async def send_line(self, text: str) -> None:
        """Write one message, already JSON text without a line break."""
        if self.closed:
            raise anyio.ClosedResourceError
        data = (text + "\n").encode(self._encoding, self._errors)
        # One write of the whole line (the pipe's buffer takes it at once, so concurrent
        # senders never interleave), then the wait for the buffer to drain.
        try:
            if self._writer is not None:
                # The pipe's asyncio writer itself: anyio's wrapper adds a cancellation
                # checkpoint and a shielded pass through the event loop to every write
                # (decision record 0029); drain waits only while the pipe is full.
                self._writer.write(data)
                await self._writer.drain()
            else:
                await self._stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError,
                RuntimeError) as exc:
            # The server may still be alive: the client sees the connection end
            # instead of a request waiting forever (as the SDK's transport does).
            self.closed = True
            await self._lines.end()
            raise anyio.BrokenResourceError from exc


def _asyncio_writer(stdin: ByteSendStream) -> asyncio.StreamWriter | None:
    # anyio's asyncio backend keeps the process's StreamWriter as ``_stream``; any other
    # stream (another backend, a later anyio) is written through its own ``send``.
    writer = getattr(stdin, "_stream", None)
    return writer if isinstance(writer, asyncio.StreamWriter) else None


class ServerPipes:
    """`stdio_server_pipes` as the client's transport, keeping the two ends it yields, so
    the connection's ``tools/call`` requests can be written to them directly
    (`hookgate.mcp.pipe_calls`)."""

    def __init__(self, server: StdioServerParameters) -> None:
        self._cm = stdio_server_pipes(server)
        self.lines: ServerLines | None = None
        self.input: ServerInput | None = None

    async def __aenter__(self) -> TransportStreams:
        lines, writer = await self._cm.__aenter__()
        assert isinstance(lines, ServerLines) and isinstance(writer, ServerInput)
        self.lines, self.input = lines, writer
        return lines, writer

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._cm.__aexit__(*exc)
