"""One downstream MCP server: its connection (official ``mcp`` client), started on demand.

The connection lives in a task of its own, because the SDK's client is an anyio context
that must be entered and left by the same task. A server that crashed is started again at
the next request; the request that saw the crash fails, since its outcome is unknown.
A server that says its tools changed (``notifications/tools/list_changed`` on the handshake
protocol, a ``subscriptions/listen`` event on 2026-07-28) is listed again, and the listeners
registered with `on_tools_changed` hear of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TextIO, TypeVar

import httpx2
import mcp_types as types
from mcp import Client, ClientSession, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from hookgate.config.mcp_servers import McpServerSpec
from hookgate.mcp.downstream_stdio import ServerPipes
from hookgate.mcp.errors import DownstreamError
from hookgate.mcp.pipe_calls import write_tool_calls_directly
from hookgate.telemetry.mcp_spans import HttpTraceHeaders, downstream_span

log = logging.getLogger(__name__)
_T = TypeVar("_T")

#: Upper bound on pages of one listing, so a server that paginates forever cannot hang us.
_MAX_PAGES = 100
#: After a failed start, calls fail at once with that failure for this long, instead of
#: each paying for another start; `restart` tries again immediately.
START_BACKOFF_S = 15.0
#: How long an open connection may take to close its own way before it is cancelled.
STOP_GRACE_S = 5.0


class DownstreamServer:
    """A started-on-demand connection to one ``mcp_servers:`` entry."""

    def __init__(self, spec: McpServerSpec, *, errlog: TextIO | None = None) -> None:
        self.spec = spec
        self.errlog = errlog or sys.stderr
        self._client: Client | None = None
        self._tools: list[types.Tool] = []
        self._holder: asyncio.Task[None] | None = None
        self._closing: asyncio.Event | None = None
        #: The connection of the current holder, once its handshake is done.
        self._ready: asyncio.Future[Client] | None = None
        #: Holders of connections that never opened, still ending their processes.
        self._ending: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()
        self._failed: tuple[float, DownstreamError] | None = None
        #: How many times a connection was opened (restarts included).
        self.starts = 0
        self._trace_headers = HttpTraceHeaders()
        #: Bumped at every start and every new listing of the tools: who built something
        #: from `tools()` rebuilds it when this moved.
        self.generation = 0
        self._listeners: list[Callable[[str], Awaitable[None]]] = []
        self._refresh: asyncio.Task[None] | None = None
        self._refresh_again = False

    def on_tools_changed(self, listener: Callable[[str], Awaitable[None]]) -> None:
        """Await ``listener(server id)`` after the server's tools changed and were listed."""
        self._listeners.append(listener)

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def running(self) -> bool:
        return self._client is not None and self._holder is not None and not self._holder.done()

    # -- lifecycle ---------------------------------------------------------------------------

    async def client(self) -> Client:
        """The live connection, starting the server first if it is not running."""
        if self.running:
            assert self._client is not None
            return self._client
        async with self._lock:
            if not self.running:
                self._raise_recent_failure()
                await self._start()
            assert self._client is not None
            return self._client

    def _raise_recent_failure(self) -> None:
        if self._failed is None:
            return
        at, error = self._failed
        if time.monotonic() - at < START_BACKOFF_S:
            raise error

    async def tools(self) -> list[types.Tool]:
        """The server's tools as listed when it (last) started."""
        await self.client()
        return list(self._tools)

    async def restart(self) -> None:
        """Stop the server (if running) and start it again."""
        async with self._lock:
            await self._stop()
            await self._start()

    async def close(self) -> None:
        if self._refresh is not None:
            self._refresh.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._refresh
        async with self._lock:
            await self._stop()
        if self._ending:
            await asyncio.wait(set(self._ending))

    async def _start(self) -> None:
        try:
            await self._open()
        except DownstreamError as exc:
            self._failed = (time.monotonic(), exc)
            raise
        self._failed = None

    async def _open(self) -> None:
        await self._stop()
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._ready = ready
        self._closing = asyncio.Event()
        self._holder = asyncio.create_task(self._hold(ready, self._closing),
                                           name=f"mcp-downstream-{self.id}")
        try:
            async with asyncio.timeout(self.spec.startup_timeout_s):
                client = await asyncio.shield(ready)
                self._tools = await self._list_tools(client)
        except TimeoutError:
            await self._stop()
            raise DownstreamError(self.id, f"did not complete its start within "
                                           f"{self.spec.startup_timeout_s:g}s") from None
        except DownstreamError:
            await self._stop()
            raise
        except Exception as exc:
            await self._stop()
            raise DownstreamError(self.id, f"could not start: {_reason(exc)}") from exc
        self._client = client
        self.starts += 1
        self.generation += 1

    async def _stop(self) -> None:
        self._client = None
        holder, self._holder = self._holder, None
        ready, self._ready = self._ready, None
        if holder is None:
            return
        if self._closing is not None:
            self._closing.set()
        if ready is None or not ready.done() or ready.cancelled() \
                or ready.exception() is not None:
            # It never completed its handshake: nothing to close, nobody waits. Its process
            # is ended in the background (the SDK's own shutdown: stdin closed, a grace, a
            # kill); `close` waits for what is still ending.
            holder.cancel()
            self._ending.add(holder)
            holder.add_done_callback(functools.partial(_ended, self._ending, ready))
            return
        # An open connection closes its own way (its server's process ends with it).
        with contextlib.suppress(TimeoutError, Exception):
            await asyncio.wait_for(asyncio.shield(holder), STOP_GRACE_S)
        holder.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await holder

    @property
    def ending(self) -> int:
        """Connections that never opened whose processes are still being ended."""
        return len(self._ending)

    async def _hold(self, ready: asyncio.Future[Client], closing: asyncio.Event) -> None:
        try:
            target = self._target()
            async with Client(target, cache=None,
                              message_handler=self._on_message) as client:
                _output_checked_by_the_mapping(client.session)
                if isinstance(target, ServerPipes) and target.lines is not None \
                        and target.input is not None:
                    # Each tools/call straight onto the pipe (decision record 0036).
                    write_tool_calls_directly(client.session, target.lines.answers,
                                              target.input)
                ready.set_result(client)
                watch = self._watch(client)
                try:
                    await closing.wait()
                finally:
                    if watch is not None:
                        watch.cancel()
                        with contextlib.suppress(asyncio.CancelledError, Exception):
                            await watch
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else
                                    RuntimeError(f"interrupted: {type(exc).__name__}"))
            elif not closing.is_set():
                log.warning("MCP server '%s' connection ended: %s", self.id, _reason(exc))
            if not isinstance(exc, Exception):
                raise
        finally:
            if self._holder is asyncio.current_task():
                self._client = None  # (a holder ending in the background leaves a newer one)

    # -- tools that change -------------------------------------------------------------------

    async def _on_message(self, message: Any) -> None:
        # Handshake-era servers notify on the session; this runs in the client's reader,
        # so the new listing is fetched elsewhere.
        if isinstance(message, types.ToolListChangedNotification):
            self._tools_changed()

    def _watch(self, client: Client) -> asyncio.Task[None] | None:
        caps = client.server_capabilities
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS or caps.tools is None \
                or not caps.tools.list_changed:
            return None
        return asyncio.create_task(self._listen(client), name=f"mcp-watch-{self.id}")

    async def _listen(self, client: Client) -> None:
        # 2026-07-28 servers deliver changes only on a subscriptions/listen stream.
        try:
            async with client.listen(tools_list_changed=True) as events:
                async for _event in events:
                    self._tools_changed()
        except Exception as exc:
            log.warning("MCP server '%s': watching its tool list failed: %s", self.id,
                        _reason(exc))

    def _tools_changed(self) -> None:
        if self._refresh is not None and not self._refresh.done():
            self._refresh_again = True  # changed again while listing: list once more after
            return
        self._refresh = asyncio.create_task(self._relist(), name=f"mcp-relist-{self.id}")

    async def _relist(self) -> None:
        while True:
            self._refresh_again = False
            client = self._client
            if client is None:
                return  # not running: the next start lists the tools anyway
            try:
                tools = await self._request(client, "tools/list", self._list_tools(client))
            except DownstreamError as exc:
                log.warning("%s; keeping the tools listed before", exc)
                return
            if self._client is not client:
                return
            self._tools = tools
            self.generation += 1
            for listener in list(self._listeners):
                try:
                    await listener(self.id)
                except Exception:
                    log.exception("a listener of MCP server '%s' tool changes failed", self.id)
            if not self._refresh_again:
                return

    def _target(self) -> Any:
        spec = self.spec
        if spec.command is not None:
            return ServerPipes(StdioServerParameters(
                command=spec.command, args=list(spec.args), env=dict(spec.env) or None,
                cwd=spec.cwd))
        assert spec.url is not None
        hooks = self._trace_headers
        http = httpx2.AsyncClient(headers=dict(spec.headers),
                                  timeout=httpx2.Timeout(30.0, read=spec.timeout_s + 5),
                                  event_hooks={"request": [hooks.request],
                                               "response": [hooks.response]})
        return _HttpTransport(spec.url, http)

    async def _list_tools(self, client: Client) -> list[types.Tool]:
        out: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            out.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return out
        raise DownstreamError(self.id, f"listed more than {_MAX_PAGES} pages of tools")

    # -- requests ----------------------------------------------------------------------------

    async def call_tool(self, name: str, args: dict[str, Any]) -> types.CallToolResult:
        """Call a tool once. Any failure raises DownstreamError; nothing is retried."""
        client = await self.client()
        return await self._request(client, "tools/call", client.call_tool(name, args),
                                   unknown_outcome=True, target=name)

    async def list_resources(self) -> types.ListResourcesResult:
        client = await self.client()
        return await self._request(client, "resources/list", client.list_resources())

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        client = await self.client()
        return await self._request(client, "resources/read", client.read_resource(uri),
                                   resource_uri=uri)

    async def list_prompts(self) -> types.ListPromptsResult:
        client = await self.client()
        return await self._request(client, "prompts/list", client.list_prompts())

    async def get_prompt(self, name: str, args: dict[str, str] | None) -> types.GetPromptResult:
        client = await self.client()
        return await self._request(client, "prompts/get", client.get_prompt(name, args),
                                   target=name)

    async def _request(self, client: Client, what: str, call: Awaitable[_T],
                       unknown_outcome: bool = False, target: str | None = None,
                       resource_uri: str | None = None) -> _T:
        with downstream_span(what, target, url=self.spec.url,
                             session_id=self._trace_headers.session_id,
                             protocol_version=_protocol_version(client),
                             resource_uri=resource_uri) as traced:
            try:
                result = await self._answer(client, what, call, unknown_outcome)
            except DownstreamError as exc:
                traced.failed(exc.kind, str(exc), exc.rpc_code)
                raise
            if getattr(result, "is_error", False):
                traced.failed("tool_error", "the tool reported an error")
            return result

    async def _answer(self, client: Client, what: str, call: Awaitable[_T],
                      unknown_outcome: bool) -> _T:
        after = "; its outcome is unknown and it is not retried" if unknown_outcome else ""
        try:
            async with asyncio.timeout(self.spec.timeout_s):
                return await call
        except TimeoutError:
            raise DownstreamError(self.id, f"did not answer {what} within "
                                           f"{self.spec.timeout_s:g}s{after}",
                                  kind="timeout") from None
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                await self._forget(client)
                raise DownstreamError(self.id, f"closed the connection during {what} (it "
                                               f"crashed or exited){after}; it is started "
                                               "again on the next call",
                                      kind="connection_closed", rpc_code=exc.code) from None
            raise DownstreamError(self.id, f"answered {what} with an error: "
                                           f"{exc.message} (code {exc.code})",
                                  kind=str(exc.code), rpc_code=exc.code) from None
        except ValidationError as exc:
            raise DownstreamError(self.id, f"returned a malformed {what} result: "
                                           f"{exc.error_count()} problem(s), first: "
                                           f"{exc.errors()[0]['msg']}",
                                  kind="malformed_result") from None
        except Exception as exc:
            await self._forget(client)
            raise DownstreamError(self.id, f"failed during {what}: {_reason(exc)}{after}; "
                                           "it is started again on the next call",
                                  kind=type(exc).__qualname__) from exc

    async def _forget(self, client: Client) -> None:
        # Only the connection that failed is dropped; a restart may already have replaced it.
        async with self._lock:
            if self._client is client:
                await self._stop()


class _HttpTransport:
    """The SDK's streamable-HTTP client transport with our own httpx2 client (headers)."""

    def __init__(self, url: str, http: httpx2.AsyncClient) -> None:
        self._cm = streamable_http_client(url, http_client=http)
        self._http = http

    async def __aenter__(self) -> Any:
        return await self._cm.__aenter__()

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self._cm.__aexit__(*exc)
        finally:
            await self._http.aclose()


def _ended(ending: set[asyncio.Task[None]], ready: asyncio.Future[Client] | None,
           holder: asyncio.Task[None]) -> None:
    ending.discard(holder)
    if not holder.cancelled():
        holder.exception()
    if ready is not None and ready.done() and not ready.cancelled():
        ready.exception()  # seen: the failed start was reported by _open


def _output_checked_by_the_mapping(session: ClientSession) -> None:
    """The SDK's client checks a tool's result against the tool's output schema as it
    arrives; the gateway's mapping checks it again after the PostToolUse hooks (`result_of`,
    the one owner of a result's contract: what the hooks left is what the client gets). The
    check is made once, there (decision record 0029): a result that breaks its schema
    comes back as an error result saying so, and its server is not restarted for it."""
    async def checked_later(name: str, result: types.CallToolResult) -> None:
        return None

    session.validate_tool_result = checked_later  # type: ignore[method-assign]


def _protocol_version(client: Client) -> str | None:
    try:
        return str(client.protocol_version)
    except Exception:  # not negotiated (yet): the span goes without it
        return None


def _reason(exc: BaseException) -> str:
    # anyio wraps failures of task groups in exception groups; the leaf says what happened.
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"command not found ({exc.filename or exc})"
    if isinstance(exc, MCPError):
        return f"{exc.message} (code {exc.code})"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text
