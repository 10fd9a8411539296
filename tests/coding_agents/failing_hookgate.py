"""What a coding agent's hook command meets when hookgate fails: a server that answers 5xx,
hangs past every deadline of the hook, or answers 200 with a body that is no answer of
hookgate's (``malformed``: one the agent would misread and run the tool on); and a URL where
nothing listens (hookgate down)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

#: The failures a fake hookgate plays, besides "down" (`dead_url`).
MODES = ("5xx", "hung", "malformed")


def failing_hookgate(route: str, mode: str, released: threading.Event,
                     malformed: str) -> Starlette:
    """A fake hookgate at ``route`` failing as ``mode`` says (hung: until ``released``)."""
    async def answer(request: Request) -> Response:
        await request.body()
        if mode == "5xx":
            return PlainTextResponse("Internal Server Error", status_code=500)
        if mode == "hung":
            await asyncio.to_thread(released.wait, 60)
        return Response(malformed, media_type="application/json")
    return Starlette(routes=[Route(route, answer, methods=["POST"])])


@pytest.fixture
def dead_url() -> Iterator[str]:
    """A loopback URL nothing listens on while the test runs."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
