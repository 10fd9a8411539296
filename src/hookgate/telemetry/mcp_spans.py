"""MCP spans and metrics in the OpenTelemetry MCP semantic conventions, on both sides of
the gateway.

Served side: the MCP SDK's own middleware opens the SERVER span ``{mcp.method.name}
{target}`` and continues a client's ``params._meta`` traceparent; `ServedSpanAttributes` adds
what it leaves out and records ``mcp.server.operation.duration``. Downstream side:
`downstream_span` is the CLIENT span of each request hookgate sends (and records
``mcp.client.operation.duration``); `HttpTraceHeaders` copies the context the SDK put into
the message's ``params._meta`` onto the HTTP request as the ``traceparent`` header.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from hookgate.telemetry import names, values
from hookgate.telemetry.switch import SWITCH

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
        attrs = self._attributes(ctx) if span.is_recording() or SWITCH.on else {}
        if span.is_recording():
            span.set_attributes(attrs)
        if not SWITCH.on:
            return await call_next(ctx)
        metric = {k: v for k, v in attrs.items() if k in _METRIC_KEYS}
        metric.update(_request_labels(ctx.method, ctx.params))
        if ctx.protocol_version:
            metric[PROTOCOL_VERSION] = values.name(ctx.protocol_version)
        started = time.perf_counter()
        try:
            result = await call_next(ctx)
        except Exception as exc:
            code = getattr(getattr(exc, "error", None), "code", None)
            metric[names.ERROR_TYPE] = str(code) if code is not None else type(exc).__qualname__
            raise
        else:
            if _is_tool_error(result):
                metric[names.ERROR_TYPE] = "tool_error"
            return result
        finally:
            from hookgate.telemetry.instruments import instruments

            instruments().mcp_server_duration.record(time.perf_counter() - started, metric)

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


class DownstreamCall:
    """One downstream request in flight: its span (None when telemetry is off) and how it
    failed, if it did."""

    __slots__ = ("error_type", "span")

    def __init__(self, span: Span | None) -> None:
        self.span = span
        self.error_type: str | None = None

    def failed(self, error_type: str, message: str, rpc_code: int | None = None) -> None:
        """Record on the span (and the duration metric) how the request failed."""
        self.error_type = error_type
        if self.span is None:
            return
        from opentelemetry.trace import StatusCode

        self.span.set_attribute(names.ERROR_TYPE, error_type)
        if rpc_code is not None:
            self.span.set_attribute(RPC_STATUS, str(rpc_code))
        self.span.set_status(StatusCode.ERROR, values.text(message))


class _Untraced:
    """The context of a downstream request while telemetry is off: no span, no metric, and
    no generator set up and torn down around every request (decision record 0040)."""

    __slots__ = ()

    def __enter__(self) -> DownstreamCall:
        return DownstreamCall(None)

    def __exit__(self, *_exc: object) -> None:
        return None


_UNTRACED = _Untraced()


def downstream_span(method: str, target: str | None, *, url: str | None,
                    session_id: str | None, protocol_version: str | None,
                    resource_uri: str | None = None
                    ) -> contextlib.AbstractContextManager[DownstreamCall]:
    """The CLIENT span of one request to a downstream server, and its duration metric.

    Named ``{method} {target}``; the SDK's own "MCP send" span and the downstream server's
    span (it gets the context in ``params._meta``) are its children. With telemetry off,
    a context that records nothing.
    """
    if not SWITCH.on:
        return _UNTRACED
    return _traced(method, target, url=url, session_id=session_id,
                   protocol_version=protocol_version, resource_uri=resource_uri)


@contextlib.contextmanager
def _traced(method: str, target: str | None, *, url: str | None, session_id: str | None,
            protocol_version: str | None, resource_uri: str | None) -> Iterator[DownstreamCall]:
    from opentelemetry.trace import SpanKind

    from hookgate.telemetry.instruments import instruments

    attrs: dict[str, Any] = {METHOD_NAME: method,
                             **_request_labels(method, {"name": target} if target else None)}
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
    ins = instruments()
    started = time.perf_counter()
    with ins.tracer.start_as_current_span(
            name, kind=SpanKind.CLIENT, attributes=attrs, record_exception=False,
            set_status_on_exception=False) as span:
        call = DownstreamCall(span)
        try:
            yield call
        finally:
            metric = {k: v for k, v in attrs.items() if k in _METRIC_KEYS}
            if call.error_type is not None:
                metric[names.ERROR_TYPE] = call.error_type
            ins.mcp_client_duration.record(time.perf_counter() - started, metric)


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


#: The span attributes that are also the duration metrics' (low-cardinality) attributes.
_METRIC_KEYS = frozenset({METHOD_NAME, names.OPERATION_NAME, names.TOOL_NAME, PROMPT_NAME,
                          PROTOCOL_VERSION, NETWORK_TRANSPORT, NETWORK_PROTOCOL,
                          names.SERVER_ADDRESS, names.SERVER_PORT})


def _request_labels(method: str, params: Any) -> dict[str, Any]:
    # What the conventions put on a request by its method: the operation and its target.
    name = params.get("name") if isinstance(params, Mapping) else None
    labels: dict[str, Any] = {METHOD_NAME: method}
    if method == "tools/call":
        labels[names.OPERATION_NAME] = names.OP_EXECUTE_TOOL
        if isinstance(name, str) and name:
            labels[names.TOOL_NAME] = values.name(name)
    elif method == "prompts/get" and isinstance(name, str) and name:
        labels[PROMPT_NAME] = values.name(name)
    return labels


def _is_tool_error(result: Any) -> bool:
    return bool(getattr(result, "is_error", False)) or (
        isinstance(result, dict) and result.get("isError") is True)


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
