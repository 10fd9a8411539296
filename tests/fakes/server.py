"""The shared machinery of the fake chat platforms: a real HTTP server on 127.0.0.1.

``LoopbackServer`` runs any ASGI app under uvicorn in a background thread on an ephemeral
port. ``FakePlatform`` is the base of the Feishu, Slack and WeCom fakes: it records every
request, checks each against the platform's documented shape (a request that breaks it is
answered with the platform's error and noted in ``violations``), and can be told to fail
the next requests (``fail_next``: 429 with Retry-After, 500s...).

A fake also builds callbacks the way its platform would send them, as a ``BuiltCallback``
(method, headers, query, body) that a test hands to ``Channel.parse_callback`` via
``.request()`` or POSTs to a server with ``.send(client, url)``.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import parse_qsl

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from hookgate.channels.base import CallbackRequest


class LoopbackServer:
    """Serve an ASGI app on 127.0.0.1 at an ephemeral port, in a daemon thread."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> str:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the loopback server did not start")
            time.sleep(0.01)
        return self.url

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)


@dataclass
class Received:
    """One request as the fake got it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class _Failure:
    path: str
    method: str | None
    status: int
    headers: dict[str, str]
    body: Any
    remaining: int


@dataclass(frozen=True)
class BuiltCallback:
    """A callback exactly as the platform would send it."""

    method: str
    headers: dict[str, str]
    query: dict[str, str]
    body: bytes

    def request(self) -> CallbackRequest:
        """As the server route hands it to a channel: header names lower-cased."""
        return CallbackRequest(
            method=self.method,
            headers={k.lower(): v for k, v in self.headers.items()},
            query=dict(self.query),
            body=self.body,
        )

    async def send(self, client: httpx.AsyncClient, url: str) -> httpx.Response:
        return await client.request(
            self.method, url, headers=self.headers, params=self.query, content=self.body
        )


class ShapeViolation(Exception):
    """A request does not have the shape the platform documents."""


#: A route handler: the request, the path's regex match -> the answer.
Handler = Callable[[Received, "re.Match[str]"], Response]


@dataclass
class FakePlatform:
    """Base of the fakes; subclasses list their routes and error shape."""

    #: Where the platform hands out access tokens (for ``token_requests``).
    token_path: ClassVar[str] = ""

    received: list[Received] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tokens: dict[str, float] = {}  # issued access token -> expires at (epoch s)
        self._failures: list[_Failure] = []
        self._server = LoopbackServer(
            Starlette(routes=[Route("/{path:path}", self._dispatch,
                                    methods=["GET", "POST", "PATCH", "PUT", "DELETE"])])
        )

    # -- what subclasses provide -----------------------------------------------------------

    def routes(self) -> list[tuple[str, str, Handler]]:
        """(method, path regex, handler) triples."""
        raise NotImplementedError

    def violation_response(self, message: str) -> Response:
        raise NotImplementedError

    # -- running ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return self._server.url

    def __enter__(self) -> Any:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    # -- test controls ---------------------------------------------------------------------

    def fail_next(
        self,
        path: str,
        *,
        status: int = 500,
        headers: dict[str, str] | None = None,
        json_body: Any = None,
        times: int = 1,
        method: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests to ``path`` with this instead."""
        self._failures.append(
            _Failure(path, method, status, headers or {}, json_body, times)
        )

    def expire_tokens(self) -> None:
        """Make every issued token invalid early, as if revoked: the next call is refused."""
        for token in self.tokens:
            self.tokens[token] = 0.0

    @property
    def token_requests(self) -> int:
        return len(self.requests_to(self.token_path))

    def token_state(self, token: str) -> str:
        """``valid``, ``expired`` or ``unknown``."""
        if token not in self.tokens:
            return "unknown"
        return "valid" if self.tokens[token] > time.time() else "expired"

    def requests_to(self, path: str, method: str | None = None) -> list[Received]:
        return [
            r for r in self.received
            if r.path == path and (method is None or r.method == method)
        ]

    # -- dispatch --------------------------------------------------------------------------

    async def _dispatch(self, request: Request) -> Response:
        received = Received(
            method=request.method,
            path=request.url.path,
            query=dict(parse_qsl(request.url.query, keep_blank_values=True)),
            headers={k.lower(): v for k, v in request.headers.items()},
            body=await request.body(),
        )
        self.received.append(received)
        for failure in self._failures:
            if failure.remaining > 0 and failure.path == received.path and (
                failure.method is None or failure.method == received.method
            ):
                failure.remaining -= 1
                return JSONResponse(failure.body or {}, status_code=failure.status,
                                    headers=failure.headers)
        for method, pattern, handler in self.routes():
            match = re.fullmatch(pattern, received.path)
            if match and method == received.method:
                try:
                    return handler(received, match)
                except ShapeViolation as exc:
                    self.violations.append(f"{received.method} {received.path}: {exc}")
                    return self.violation_response(str(exc))
        return JSONResponse({"error": "not found"}, status_code=404)


def require(condition: object, message: str) -> None:
    """Raise ShapeViolation(message) unless ``condition`` holds."""
    if not condition:
        raise ShapeViolation(message)


def require_keys(obj: Any, allowed: set[str], where: str,
                 required: set[str] | frozenset[str] = frozenset()
                 ) -> dict[str, Any]:
    """``obj`` is an object with only ``allowed`` keys and all ``required`` ones."""
    require(isinstance(obj, dict), f"{where} must be an object")
    unknown = set(obj) - allowed
    require(not unknown, f"{where} has unknown properties {sorted(unknown)}")
    missing = required - set(obj)
    require(not missing, f"{where} lacks {sorted(missing)}")
    return dict(obj)


def json_of(received: Received) -> Any:
    require("application/json" in received.headers.get("content-type", ""),
            "Content-Type must be application/json")
    try:
        return received.json()
    except ValueError:
        raise ShapeViolation("the body is not JSON") from None
