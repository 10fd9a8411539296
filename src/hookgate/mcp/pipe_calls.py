"""A downstream stdio server's ``tools/call`` requests written onto its pipe and answered
from it without the SDK dispatcher's per-request machinery (decision record 0036).

The SDK's client session still makes each call: it builds the request's params (the era's
envelope, its stamp), and validates the answer against the negotiated protocol. Only the
hop below it changes: where its dispatcher would open a memory stream, events, a request
clock and a span for every request, the request goes onto the pipe as one line and its
answer, parsed and checked by the SDK's own line parser, is handed back through a future.
Every other request (listings, resources, prompts, subscriptions), and a call that asks
for something only the dispatcher does (progress, a read timeout, resumption), goes
through the dispatcher as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.shared._otel import inject_trace_context  # the SDK's own (SEP-414)
from mcp_types import CONNECTION_CLOSED

log = logging.getLogger(__name__)

#: The methods written directly: the one a guarded call makes on every call.
DIRECT_METHODS = frozenset({"tools/call"})
#: Options the direct write honours (the stamp's HTTP headers mean nothing on a pipe).
_DIRECT_OPTIONS = frozenset({"headers", "cancel_on_abandon"})
#: How long the courtesy ``notifications/cancelled`` of an abandoned call may take to write.
ABANDON_WRITE_S = 5.0
#: Ids of direct requests: strings, never the dispatcher's integers.
ID_PREFIX = "hookgate-"

SendRaw = Callable[..., Awaitable[dict[str, Any]]]
Notify = Callable[..., Awaitable[None]]


class LineWriter(Protocol):
    """Where a request line goes (the server's stdin)."""

    async def send_line(self, line: str) -> None: ...


class Answers:
    """The direct requests waiting for their answers, by id; the reader of the server's
    stdout hands each answer to its waiter (`take`), and the end of the connection fails
    every waiter (`close`)."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[types.JSONRPCResponse | types.JSONRPCError]] = {}
        self.closed = False

    def __bool__(self) -> bool:
        return bool(self._waiting)

    def expect(self, request_id: str) -> asyncio.Future[types.JSONRPCResponse
                                                       | types.JSONRPCError]:
        if self.closed:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        answer = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = answer
        return answer

    def forget(self, request_id: str) -> None:
        self._waiting.pop(request_id, None)

    def take(self, message: Any) -> bool:
        """Whether ``message`` (parsed by the SDK) answered a direct request, which then
        has it; anything else is the dispatcher's, as before."""
        if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError) \
                or not isinstance(message.id, str):
            return False
        answer = self._waiting.pop(message.id, None)
        if answer is None:
            return False  # an id nobody here asked: the dispatcher drops it, as any other
        if not answer.done():
            answer.set_result(message)
        return True

    def close(self) -> None:
        """The connection ended: every waiting request fails as the dispatcher's do."""
        self.closed = True
        waiting, self._waiting = self._waiting, {}
        for answer in waiting.values():
            if not answer.done():
                answer.set_exception(MCPError(code=CONNECTION_CLOSED,
                                              message="Connection closed"))


class PipeCalls:
    """``send_raw_request`` for one downstream connection: ``tools/call`` straight onto the
    pipe, everything else through the dispatcher's own (``fallback``)."""

    def __init__(self, answers: Answers, writer: LineWriter, fallback: SendRaw,
                 notify: Notify) -> None:
        self._answers = answers
        self._writer = writer
        self._fallback = fallback
        self._notify = notify
        self._ids = itertools.count(1)

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None,
                               opts: Mapping[str, Any] | None = None,
                               **extra: Any) -> dict[str, Any]:
        if method not in DIRECT_METHODS or extra or (opts and not _DIRECT_OPTIONS.issuperset(
                key for key, value in opts.items() if value is not None)):
            return await self._fallback(method, params, opts, **extra)
        request_id = f"{ID_PREFIX}{next(self._ids)}"
        out = dict(params) if params is not None else {}
        meta = dict(out.get("_meta") or {})
        inject_trace_context(meta)  # the caller's trace goes on, as the dispatcher sends it
        if meta:
            out["_meta"] = meta
        else:
            out.pop("_meta", None)
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                           "params": out}, ensure_ascii=False, allow_nan=False,
                          separators=(",", ":"))
        answer = self._answers.expect(request_id)
        written = False
        try:
            try:
                written = True  # a write cut short may have reached the server
                await self._writer.send_line(line)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                raise MCPError(code=CONNECTION_CLOSED, message="Connection closed") from None
            got = await answer
        except asyncio.CancelledError:
            if written and (opts or {}).get("cancel_on_abandon", True):
                await self._cancel(request_id)
            raise
        finally:
            self._answers.forget(request_id)
        if isinstance(got, types.JSONRPCError):
            raise MCPError(code=got.error.code, message=got.error.message, data=got.error.data)
        return got.result

    async def _cancel(self, request_id: str) -> None:
        # The courtesy cancel the dispatcher sends for an abandoned request, so the server
        # stops its work; shielded from the cancellation that abandoned it.
        cancel = asyncio.ensure_future(asyncio.wait_for(self._notify(
            "notifications/cancelled", {"requestId": request_id, "reason": "caller cancelled"}),
            ABANDON_WRITE_S))
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.shield(cancel)


def write_tool_calls_directly(session: Any, answers: Answers, writer: LineWriter) -> bool:
    """Have ``session`` (the SDK's client session of a stdio connection) send its
    ``tools/call`` requests through `PipeCalls`; False (and nothing changed) when its
    dispatcher is not the one this knows, so its requests go the SDK's way, slower only."""
    dispatcher = getattr(session, "_dispatcher", None)
    fallback = getattr(dispatcher, "send_raw_request", None)
    notify = getattr(dispatcher, "notify", None)
    if fallback is None or notify is None:
        return False
    calls = PipeCalls(answers, writer, fallback, notify)
    dispatcher.send_raw_request = calls.send_raw_request  # type: ignore[union-attr]
    return True
