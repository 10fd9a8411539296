"""``hookgate mcp stdio``: a local MCP client's messages relayed to a running hookgate server.

The process is a thin client of the server's gateway (``/mcp/{agent}``): every JSON-RPC
message the client writes on stdin goes to the gateway with the user's token, and everything
the gateway sends (results, progress, elicitations, ``tools/list_changed``) comes back on
stdout. It opens no database and holds no secrets key: the server decides everything.
By default the whole session goes over one WebSocket (hookgate.mcp.relay_socket; the server
serves the session there as it would over stdio). Against a server that offers no socket,
after the socket closed, or with ``--connection http``, each message is an HTTP request to
the streamable-HTTP gateway instead, as follows.
Messages pass through as the bytes they are (read as JSON only for their id, method and
envelope, never re-encoded), over kept-alive connections of one HTTP client. A request of the
2026-07-28 protocol carries its version in ``_meta``; the relay repeats it in the HTTP
headers the gateway checks, as the SDK's own client does (`Envelope`); on the handshake
protocol it keeps the session's id and version, and its event stream. Anything missing
before it relays (the URL, the token, a server that answers, access to the agent) is a
`StdioRefusal` whose message is one line (an MCP client shows the process's stderr to its
user); a request the gateway cannot answer gets a JSON-RPC error saying why.
With ``HOOKGATE_ACTS_FOR`` set (a service identity's token), every request and the socket
carry it as the ``Hookgate-Acts-For`` header: the person the session's calls act for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp

from hookgate.mcp.event_stream import EventTooLarge, event_data
from hookgate.mcp.message_ids import id_key
from hookgate.mcp.pipes import LineReader, LineWriter
from hookgate.mcp.refusal import TOKEN_ENV, StdioRefusal, one_line
from hookgate.mcp.relay_socket import SocketRelay, open_socket

if TYPE_CHECKING:
    from hookgate.mcp.envelope import Envelope

# The MCP SDK (its protocol versions, header names, error codes and the per-request
# envelope's header rules) is imported where the HTTP relay first needs it, not here: over
# the server's socket (the default) the relay passes bytes and needs none of it, and
# importing it cost ~0.9 CPU-s of the ~1.45 s a `hookgate mcp stdio` spent before it read
# its token (decision record 0033).

#: Where ``hookgate mcp stdio`` reads the server's base URL.
URL_ENV = "HOOKGATE_URL"
#: Where ``hookgate mcp stdio`` reads the person a service identity's calls act for.
ACTS_FOR_ENV = "HOOKGATE_ACTS_FOR"
#: The header the gateway reads it from (hookgate.mcp.http).
ACTS_FOR_HEADER = "Hookgate-Acts-For"
#: How long the first check of the server may take before the client is told it failed.
CHECK_TIMEOUT_S = 15.0

#: The session id header of the handshake protocol.
SESSION_HEADER = "mcp-session-id"
#: How often the handshake session's event stream is opened again after it failed in a row.
STREAM_ATTEMPTS = 3

log = logging.getLogger(__name__)

__all__ = ["Relay", "check_access", "gateway_url", "proxy_for", "relay_stdio"]


def gateway_url(base: str | None, agent_id: str) -> str:
    """``https://gate.example/mcp/coder`` from the server's base URL and the agent."""
    if not base:
        raise StdioRefusal(f"set {URL_ENV} to your hookgate server's URL (such as "
                           "https://gate.example.com), or pass --in-process on a machine "
                           "trusted with the server's database and secrets key")
    if not base.startswith(("http://", "https://")):
        raise StdioRefusal(f"{URL_ENV} must start with http:// or https://, got {base!r}")
    return f"{base.rstrip('/')}/mcp/{agent_id}"


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url`` (HTTPS_PROXY / HTTP_PROXY, unless NO_PROXY
    covers its host), read once: asking the environment at every request (aiohttp's
    ``trust_env``) doubles what a relayed call costs."""
    parts = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return urllib.request.getproxies().get(parts.scheme)


async def check_access(http: aiohttp.ClientSession, url: str) -> None:
    """Refuse in one line unless the server answers and lets this token reach the agent.

    A GET without a session is what any client may send; the gateway checks the token and
    the agent before anything else, so 401 and 404 say which of them is wrong."""
    try:
        async with http.get(url, headers={"accept": "text/event-stream"},
                            timeout=aiohttp.ClientTimeout(total=CHECK_TIMEOUT_S)) as answer:
            said = await _said(answer) if answer.status in (401, 403, 404, 503) else ""
    except (aiohttp.ClientError, TimeoutError) as exc:
        told = one_line(str(exc)) or type(exc).__name__
        raise StdioRefusal(f"cannot reach hookgate at {url}: {told} (is the server "
                           f"running, and is {URL_ENV} its URL?)") from exc
    if answer.status == 401:
        raise StdioRefusal(f"the token in {TOKEN_ENV} is not valid at {url}: {said}")
    if answer.status in (403, 404, 503):
        raise StdioRefusal(f"{url} answered {answer.status}: {said}")


async def _said(answer: aiohttp.ClientResponse) -> str:
    text = (await answer.read()).decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except ValueError:
        return one_line(text[:300]) or str(answer.reason)
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping):
        error = error.get("message")
    return one_line(str(error or body))[:300]


@dataclass(slots=True)
class _Post:
    """A request's POST in flight: cancelling its task closes its response stream."""

    task: asyncio.Task[None]
    modern: bool


class Relay:
    """One client's messages to the gateway at ``url`` and the gateway's back to ``write``."""

    def __init__(self, http: aiohttp.ClientSession, url: str, out: LineWriter,
                 socket: SocketRelay | None = None) -> None:
        self.http, self.url, self.out = http, url, out
        #: The server's socket while it is open (hookgate.mcp.relay_socket): every message
        #: goes through it; once it closed, each is posted as below.
        self.socket = socket
        self._envelope: Envelope | None = None
        #: The handshake session, once ``initialize`` opened one.
        self.session_id: str | None = None
        #: The protocol version sent with a message that names none itself (the handshake's
        #: negotiated one, or the last per-request version seen).
        self.version: str | None = None
        self._initialize: str | None = None
        self._posts: dict[str, _Post] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def envelope(self) -> Envelope:
        """The per-request protocol's headers, made when the first message goes over HTTP."""
        if self._envelope is None:
            from hookgate.mcp.envelope import Envelope

            self._envelope = Envelope()
        return self._envelope

    # -- client → gateway ----------------------------------------------------------------------

    async def upward(self, line: bytes) -> None:
        """Relay one line the client wrote."""
        body = line.strip()
        if not body:
            return
        try:
            message = json.loads(body)
        except ValueError as exc:  # said, not relayed: the gateway would refuse it anyway
            log.warning("hookgate mcp stdio: a line that is not JSON: %s", one_line(str(exc)))
            return
        if not isinstance(message, dict):
            log.warning("hookgate mcp stdio: not a JSON-RPC message (a batch?): not relayed")
            return
        if self.socket is not None:
            if await self.socket.upward(body, message):
                return
            log.warning("hookgate mcp stdio: the connection to %s closed; relaying over "
                        "HTTP from now on", self.url)
            self.socket = None
        from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        method = message.get("method")
        if method == "notifications/cancelled" and self._cancelled_here(message):
            return
        if method == "initialize":
            self.version = None  # the negotiation: no version yet
            self._initialize = id_key(message.get("id"))
        headers = self.envelope.headers_for(message)
        if MCP_PROTOCOL_VERSION_HEADER in headers:
            self.version = headers[MCP_PROTOCOL_VERSION_HEADER]
        if method == "notifications/initialized" and self.session_id is not None:
            self._spawn(self._event_stream())
        if isinstance(method, str) and "id" in message:
            key = id_key(message["id"])
            superseded = self._posts.pop(key, None)
            if superseded is not None:  # a reused id: the old answer is no longer awaited
                superseded.task.cancel()
            task = self._spawn(self._request(body, headers, message["id"], method))
            self._posts[key] = _Post(task, self.version in MODERN_PROTOCOL_VERSIONS)
            task.add_done_callback(lambda done: self._forget_post(key, done))
        else:
            await self._notify(body, headers)

    def _cancelled_here(self, message: Mapping[str, Any]) -> bool:
        # On the per-request protocol closing a request's stream is its cancellation; the
        # handshake protocol posts the notification (as the SDK's own client does).
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, Mapping) else None
        post = self._posts.get(id_key(request_id)) if request_id is not None else None
        if post is not None:
            if not post.modern:
                return False
            post.task.cancel()
            return True
        return self.version in MODERN_PROTOCOL_VERSIONS

    def _forget_post(self, key: str, task: asyncio.Task[None]) -> None:
        post = self._posts.get(key)
        if post is not None and post.task is task:
            del self._posts[key]

    def _headers(self, own: Mapping[str, str]) -> dict[str, str]:
        from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER

        headers = {"accept": "application/json, text/event-stream",
                   "content-type": "application/json"}
        if self.session_id is not None:
            headers[SESSION_HEADER] = self.session_id
        if self.version is not None:
            headers[MCP_PROTOCOL_VERSION_HEADER] = self.version
        headers.update(own)
        return headers

    async def _notify(self, body: bytes, headers: Mapping[str, str]) -> None:
        # A notification, or the client's answer to the gateway's request: 202, no body.
        try:
            async with self.http.post(self.url, data=body,
                                      headers=self._headers(headers)) as answer:
                if answer.status >= 400:
                    log.warning("hookgate mcp stdio: %s answered %s to a message: %s",
                                self.url, answer.status, await _said(answer))
        except aiohttp.ClientError as exc:
            log.warning("hookgate mcp stdio: a message did not reach %s: %s", self.url,
                        one_line(str(exc)) or type(exc).__name__)

    async def _request(self, body: bytes, headers: Mapping[str, str], request_id: Any,
                       method: str) -> None:
        from mcp_types import CONNECTION_CLOSED

        try:
            async with self.http.post(self.url, data=body,
                                      headers=self._headers(headers)) as answer:
                if method == "initialize" and answer.status < 300:
                    self.session_id = answer.headers.get(SESSION_HEADER) or self.session_id
                await self._answer(answer, request_id)
        except (aiohttp.ClientError, EventTooLarge) as exc:
            said = one_line(str(exc)) or type(exc).__name__
            await self._error(request_id, CONNECTION_CLOSED,
                              f"hookgate at {self.url} did not answer: {said}")

    async def _answer(self, answer: aiohttp.ClientResponse, request_id: Any) -> None:
        from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST

        kind = answer.content_type.lower()
        if answer.status == 202:
            await self._error(request_id, INVALID_REQUEST,
                              "server answered a request with 202 Accepted")
        elif 300 <= answer.status < 400:
            await self._error(request_id, INVALID_REQUEST,
                              f"hookgate answered {answer.status} to "
                              f"{answer.headers.get('location', 'elsewhere')} (not followed)")
        elif answer.status >= 400:
            await self._refused(answer, request_id, kind)
        elif kind == "application/json":
            await self._down(await answer.read())
        elif kind == "text/event-stream":
            async for data in event_data(answer.content):
                if await self._down(data, request_id):
                    return
            await self._error(request_id, CONNECTION_CLOSED,
                              "the gateway's stream ended without an answer")
        else:
            await self._error(request_id, INVALID_REQUEST,
                              f"the gateway answered with unexpected content type {kind!r}")

    async def _refused(self, answer: aiohttp.ClientResponse, request_id: Any,
                       kind: str) -> None:
        # A JSON-RPC error in the body says it best; else the status does.
        from mcp_types import INTERNAL_ERROR, INVALID_REQUEST

        body = await answer.read()
        if kind == "application/json":
            with contextlib.suppress(ValueError):
                said = json.loads(body)
                if isinstance(said, dict) and isinstance(said.get("error"), dict) \
                        and "code" in said["error"]:
                    await self._send({"jsonrpc": "2.0", "id": request_id,
                                      "error": said["error"]})
                    return
        if answer.status == 404 and self.session_id is not None:
            await self._error(request_id, INVALID_REQUEST, "Session terminated")
            return
        text = one_line(body[:300].decode("utf-8", "replace"))
        await self._error(request_id, INTERNAL_ERROR,
                          f"hookgate answered {answer.status}: {text or answer.reason}")

    async def _event_stream(self) -> None:
        # The handshake session's stream of messages not tied to a request (tools changed).
        failures = 0
        while self.session_id is not None and failures < STREAM_ATTEMPTS:
            try:
                async with self.http.get(
                        self.url, headers=self._headers({"accept": "text/event-stream"})
                ) as answer:
                    if answer.status != 200:
                        return  # no stream offered (405) or the session is gone (404)
                    failures = 0
                    async for data in event_data(answer.content):
                        await self._down(data)
            except (aiohttp.ClientError, EventTooLarge) as exc:
                failures += 1
                log.debug("the session's event stream failed: %s", exc)
                await asyncio.sleep(1.0)

    # -- gateway → client ----------------------------------------------------------------------

    async def _down(self, data: bytes, request_id: Any = None) -> bool:
        """Pass one message to the client; whether it answers ``request_id``."""
        try:
            message = json.loads(data)
        except ValueError:
            log.warning("hookgate mcp stdio: the gateway sent a message that is not JSON")
            return False
        if not isinstance(message, dict):
            return False
        self.envelope.note(message)
        answers = "method" not in message and "id" in message
        if answers and self._initialize == id_key(message["id"]):
            self._initialize = None
            result = message.get("result")
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            if isinstance(version, str):
                self.version = version
        # One line per message: compact JSON has none inside; anything else is re-encoded.
        line = data.strip() if b"\n" not in data.strip() else json.dumps(message).encode()
        await self.out.write(line + b"\n")
        return answers and request_id is not None and \
            id_key(message["id"]) == id_key(request_id)

    async def _error(self, request_id: Any, code: int, text: str) -> None:
        await self._send({"jsonrpc": "2.0", "id": request_id,
                          "error": {"code": code, "message": text}})

    async def _send(self, message: Mapping[str, Any]) -> None:
        await self.out.write(json.dumps(message).encode() + b"\n")

    # -- lifetime -----------------------------------------------------------------------------

    def _spawn(self, work: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("hookgate mcp stdio: relaying failed: %s", task.exception())

    async def aclose(self) -> None:
        """Stop relaying: requests in flight are abandoned, the session ends."""
        if self.socket is not None:
            await self.socket.aclose()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.session_id is not None:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with self.http.delete(self.url, headers=self._headers({}),
                                            timeout=aiohttp.ClientTimeout(total=5.0)):
                    pass
            self.session_id = None


async def relay_stdio(base_url: str | None, agent_id: str, token: str | None, *,
                      socket: bool = True) -> None:
    """Relay the client on stdin/stdout to ``agent_id``'s gateway until stdin closes: over
    one WebSocket when ``socket`` and the server offers one, else an HTTP request per
    message."""
    url = gateway_url(base_url, agent_id)
    if not token:
        raise StdioRefusal(f"set {TOKEN_ENV} to your hookgate API token")
    # No read timeout: a call may wait long for a person (progress keeps it moving).
    # Connections are kept alive and reused: a call costs no connection set-up.
    headers = {"authorization": f"Bearer {token}"}
    acts_for = os.environ.get(ACTS_FOR_ENV)
    if acts_for:
        headers[ACTS_FOR_HEADER] = acts_for
    http = aiohttp.ClientSession(headers=headers,
                                 timeout=aiohttp.ClientTimeout(total=None, sock_connect=30.0),
                                 proxy=proxy_for(url))
    async with http:
        await check_access(http, url)
        lines, out = LineReader(), LineWriter()
        await lines.open()
        await out.open()
        opened = await open_socket(http, url) if socket else None
        relay = Relay(http, url, out, None if opened is None else SocketRelay(opened, url, out))
        try:
            while line := await lines.readline():
                await relay.upward(line)
        finally:
            await relay.aclose()
