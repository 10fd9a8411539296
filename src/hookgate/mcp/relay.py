"""``hookgate mcp stdio``: a local MCP client's messages relayed to a running hookgate server.

The process is a thin client of the server's HTTP gateway (``/mcp/{agent}``): every JSON-RPC
message the client writes on stdin goes to the gateway with the user's token, and everything
the gateway sends (results, progress, elicitations, ``tools/list_changed``) comes back on
stdout. It opens no database and holds no secrets key: the server decides everything. A
request of the 2026-07-28 protocol carries its version in ``_meta``; the relay repeats it in
the HTTP headers the gateway checks, as the SDK's own client does (`Envelope`). Anything
missing before it relays (the URL, the token, a server that answers, access to the agent) is
a `StdioRefusal` whose message is one line (an MCP client shows the process's stderr to its
user).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.server.stdio import stdio_server
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
    mcp_param_headers,
    x_mcp_header_map,
)
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp_types import PROTOCOL_VERSION_META_KEY, JSONRPCError, JSONRPCRequest, JSONRPCResponse

from hookgate.mcp.refusal import TOKEN_ENV, StdioRefusal, one_line

#: Where ``hookgate mcp stdio`` reads the server's base URL.
URL_ENV = "HOOKGATE_URL"
#: How long the first check of the server may take before the client is told it failed.
CHECK_TIMEOUT_S = 15.0

log = logging.getLogger(__name__)

Incoming = ReadStream[SessionMessage | Exception]
Outgoing = WriteStream[SessionMessage]


def gateway_url(base: str | None, agent_id: str) -> str:
    """``https://gate.example/mcp/coder`` from the server's base URL and the agent."""
    if not base:
        raise StdioRefusal(f"set {URL_ENV} to your hookgate server's URL (such as "
                           "https://gate.example.com), or pass --in-process on a machine "
                           "trusted with the server's database and secrets key")
    if not base.startswith(("http://", "https://")):
        raise StdioRefusal(f"{URL_ENV} must start with http:// or https://, got {base!r}")
    return f"{base.rstrip('/')}/mcp/{agent_id}"


async def check_access(http: httpx2.AsyncClient, url: str) -> None:
    """Refuse in one line unless the server answers and lets this token reach the agent.

    A GET without a session is what any client may send; the gateway checks the token and
    the agent before anything else, so 401 and 404 say which of them is wrong."""
    try:
        answer = await http.get(url, headers={"accept": "text/event-stream"},
                                timeout=CHECK_TIMEOUT_S)
    except httpx2.HTTPError as exc:
        said = one_line(str(exc)) or type(exc).__name__
        raise StdioRefusal(f"cannot reach hookgate at {url}: {said} (is the server "
                           f"running, and is {URL_ENV} its URL?)") from exc
    if answer.status_code == 401:
        raise StdioRefusal(f"the token in {TOKEN_ENV} is not valid at {url}: "
                           f"{_said(answer)}")
    if answer.status_code in (403, 404, 503):
        raise StdioRefusal(f"{url} answered {answer.status_code}: {_said(answer)}")


def _said(answer: httpx2.Response) -> str:
    try:
        body = answer.json()
    except ValueError:
        return one_line(answer.text[:300]) or answer.reason_phrase
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping):
        error = error.get("message")
    return one_line(str(error or body))[:300]


class Envelope:
    """The HTTP headers a request of the per-request protocol (2026-07-28) must repeat from
    its body, as the SDK's own client sends them: the version, the method, the name, and the
    ``Mcp-Param-*`` headers of a tool whose input schema asks for them (learnt from the
    ``tools/list`` answers that pass by)."""

    def __init__(self) -> None:
        self.param_maps: dict[str, dict[tuple[str, ...], str]] = {}
        self._listings: set[Any] = set()

    def upward(self, message: SessionMessage) -> SessionMessage:
        """``message`` (client → gateway) with the headers it needs."""
        request = message.message
        if not isinstance(request, JSONRPCRequest) or not isinstance(request.params, Mapping):
            return message
        if request.method == "tools/list":
            self._listings.add(request.id)
        meta = request.params.get("_meta")
        version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, Mapping) else None
        if not isinstance(version, str):
            return message  # the handshake protocol: the session carries the version
        headers = {MCP_PROTOCOL_VERSION_HEADER: version, MCP_METHOD_HEADER: request.method}
        name_key = NAME_BEARING_METHODS.get(request.method)
        name: Any = request.params.get(name_key) if name_key is not None else None
        if isinstance(name, str):
            headers[MCP_NAME_HEADER] = encode_header_value(name)
        arguments = request.params.get("arguments")
        if request.method == "tools/call" and name in self.param_maps \
                and isinstance(arguments, Mapping):
            headers.update(mcp_param_headers(self.param_maps[name], arguments))
        return SessionMessage(request, metadata=ClientMessageMetadata(headers=headers))

    def downward(self, message: SessionMessage) -> SessionMessage:
        """``message`` (gateway → client) unchanged, after noting a tool listing's maps."""
        answer = message.message
        if isinstance(answer, JSONRPCResponse) and answer.id in self._listings:
            self._listings.discard(answer.id)
            tools = answer.result.get("tools") if isinstance(answer.result, Mapping) else None
            for tool in tools if isinstance(tools, list) else ():
                if isinstance(tool, Mapping) and isinstance(tool.get("name"), str):
                    mapped = x_mcp_header_map(tool.get("inputSchema"))
                    if mapped:
                        self.param_maps[tool["name"]] = mapped
        elif isinstance(answer, JSONRPCError):
            self._listings.discard(answer.id)
        return message


async def _pump(source: Incoming, sink: Outgoing, turn: Callable[[SessionMessage],
                                                                 SessionMessage]) -> None:
    async for item in source:
        if isinstance(item, Exception):
            # A line that is not JSON-RPC, or a transport failure: said, not relayed.
            log.warning("hookgate mcp stdio: %s", one_line(str(item)) or type(item).__name__)
            continue
        await sink.send(turn(item))


async def relay_stdio(base_url: str | None, agent_id: str, token: str | None) -> None:
    """Relay the client on stdin/stdout to ``agent_id``'s gateway until stdin closes."""
    url = gateway_url(base_url, agent_id)
    if not token:
        raise StdioRefusal(f"set {TOKEN_ENV} to your hookgate API token")
    # No read timeout: a call may wait long for a person (progress keeps it moving).
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"},
                              timeout=httpx2.Timeout(30.0, read=None))
    async with http:
        await check_access(http, url)
        async with stdio_server() as (local_in, local_out), \
                streamable_http_client(url, http_client=http) as (remote_in, remote_out), \
                anyio.create_task_group() as tg:

            envelope = Envelope()

            async def upward() -> None:
                await _pump(local_in, remote_out, envelope.upward)
                tg.cancel_scope.cancel()  # the client closed stdin: the session ends

            tg.start_soon(upward)
            tg.start_soon(_pump, remote_in, local_out, envelope.downward)
