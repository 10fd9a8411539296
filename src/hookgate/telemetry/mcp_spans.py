"""MCP spans in the OpenTelemetry MCP semantic conventions, on both sides of the gateway.

Served side: the MCP SDK's own middleware opens the SERVER span ``{mcp.method.name}
{target}`` and continues a client's ``params._meta`` traceparent; `ServedSpanAttributes` adds
what it leaves out. Downstream side: `downstream_span` is the CLIENT span of each request
hookgate sends, and `HttpTraceHeaders` copies the context the SDK put into the message's
``params._meta`` onto the HTTP request as the ``traceparent`` header.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from hookgate.telemetry import names, values

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from opentelemetry.trace import Span

#: The conventions' names (status "development"), beyond the GenAI ones in `names`.
METHOD_NAME = "mcp.method.name"
SESSION_ID = "mcp.session.id"
PROTOCOL_VERSION = "mcp.protocol.version"
RESOURCE_URI = "mcp.resource.uri"
PROMPT_NAME = "gen_ai.prompt.name"
JSONRPC_REQUEST_ID = "jsonrpc.request.id"
RPC_STATUS = "rpc.response.status_code"
NETWORK_TRANSPORT = "network.transport"
NETWORK_PROTOCOL = "network.protocol.name"
CLIENT_ADDRESS = "client.address"
CLIENT_PORT = "client.port"

_TRACE_KEYS = ("traceparent", "tracestate")


class ServedSpanAttributes:
    """An MCP server middleware, placed inside the SDK's span middleware: puts the session,
    the transport and the client's address on the SERVER span of each request it serves."""

    def __init__(self, session_of: Callable[[ServerRequestContext[Any, Any]], str | None]
                 ) -> None:
        self.session_of = session_of

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
                       ) -> HandlerResult:
        from opentelemetry import trace

        span = trace.get_current_span()
        if span.is_recording():
            span.set_attributes(self._attributes(ctx))
        return await call_next(ctx)

    def _attributes(self, ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        request = ctx.request
        attrs: dict[str, Any] = {}
        try:
            session = self.session_of(ctx)
        except Exception:  # a request that names no principal: it is refused anyway
            session = None
        if session:
            attrs[SESSION_ID] = values.name(session)
        if request is None:  # stdio
            attrs[NETWORK_TRANSPORT] = "pipe"
            return attrs
        attrs[NETWORK_TRANSPORT] = "tcp"
        attrs[NETWORK_PROTOCOL] = "http"
        client = getattr(request, "client", None)
        if client is not None:
            attrs[CLIENT_ADDRESS] = str(client.host)
            attrs[CLIENT_PORT] = int(client.port)
        return attrs


@contextlib.contextmanager
def downstream_span(method: str, target: str | None, *, url: str | None,
                    session_id: str | None, protocol_version: str | None,
                    resource_uri: str | None = None) -> Iterator[Span | None]:
    """The CLIENT span of one request to a downstream server (None when telemetry is off).

    Named ``{method} {target}``; the SDK's own "MCP send" span and the downstream server's
    span (it gets the context in ``params._meta``) are its children.
    """
    from hookgate.telemetry.switch import SWITCH

    if not SWITCH.on:
        yield None
        return
    from opentelemetry.trace import SpanKind

    from hookgate.telemetry.instruments import instruments

    attrs: dict[str, Any] = {METHOD_NAME: method}
    if method == "tools/call":
        attrs[names.OPERATION_NAME] = names.OP_EXECUTE_TOOL
        if target:
            attrs[names.TOOL_NAME] = values.name(target)
    elif method == "prompts/get" and target:
        attrs[PROMPT_NAME] = values.name(target)
    if resource_uri:
        attrs[RESOURCE_URI] = values.text(resource_uri)
    if session_id:
        attrs[SESSION_ID] = values.name(session_id)
    if protocol_version:
        attrs[PROTOCOL_VERSION] = values.name(protocol_version)
    if url is None:
        attrs[NETWORK_TRANSPORT] = "pipe"
    else:
        where = urlsplit(url)
        attrs.update({NETWORK_TRANSPORT: "tcp", NETWORK_PROTOCOL: "http",
                      names.SERVER_ADDRESS: where.hostname or "",
                      names.SERVER_PORT: where.port or (443 if where.scheme == "https" else 80)})
    name = f"{method} {values.name(target)}" if target else method
    with instruments().tracer.start_as_current_span(
            name, kind=SpanKind.CLIENT, attributes=attrs, record_exception=False,
            set_status_on_exception=False) as span:
        yield span


def mark_failed(span: Span | None, error_type: str, message: str,
                rpc_code: int | None = None) -> None:
    """Record on a downstream span how its request failed."""
    if span is None:
        return
    from opentelemetry.trace import StatusCode

    span.set_attribute(names.ERROR_TYPE, error_type)
    if rpc_code is not None:
        span.set_attribute(RPC_STATUS, str(rpc_code))
    span.set_status(StatusCode.ERROR, values.text(message))


class HttpTraceHeaders:
    """httpx request hook for a downstream HTTP server: the trace context the SDK wrote into
    a request's ``params._meta`` also goes out as the ``traceparent`` (and ``tracestate``)
    header, so the HTTP layer of that server continues the same trace. The transport posts
    from a task of its own, where the caller's span is not current: the message is the one
    place that knows which call it belongs to."""

    def __init__(self) -> None:
        #: The downstream session (``mcp-session-id``), as the server last answered it.
        self.session_id: str | None = None

    async def request(self, request: Any) -> None:
        for key in _TRACE_KEYS:
            request.headers.pop(key, None)
        meta = _meta_of(request)
        for key in _TRACE_KEYS:
            value = meta.get(key)
            if isinstance(value, str) and value.isascii() and value.isprintable():
                request.headers[key] = value

    async def response(self, response: Any) -> None:
        session = response.headers.get("mcp-session-id")
        if session:
            self.session_id = str(session)


def _meta_of(request: Any) -> dict[str, Any]:
    if request.method != "POST":
        return {}
    try:
        body = json.loads(request.content)
    except Exception:  # a streamed or non-JSON body carries no message to read
        return {}
    params = body.get("params") if isinstance(body, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else {}
