"""A hookgate that fails in each way a coding agent's hook must survive by blocking the call:
``down`` (nothing listens), ``5xx``, ``hung`` (answers after every deadline of the hook) and
``malformed`` (a 200 that is no answer of hookgate's, but one the agent would read as an
allow or misread and run the tool on)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from tests.fakes.server import LoopbackServer

__all__ = ["MODES", "SERVED_MODES", "dead_url", "failing_app", "failing_hookgate"]

MODES = ["down", "5xx", "hung", "malformed"]
#: The failures a fake hookgate plays (all but "down": `dead_url`).
SERVED_MODES = ("5xx", "hung", "malformed")


def failing_app(route: str, mode: str, released: threading.Event,
                malformed: Response) -> Starlette:
    """A fake hookgate at ``route`` failing as ``mode`` says (hung: until ``released``)."""

    async def answer(request: Request) -> Response:
        await request.body()
        if mode == "5xx":
            return PlainTextResponse("Internal Server Error", status_code=500)
        if mode == "hung":  # past every deadline of the hook, until the test ends
            await asyncio.to_thread(released.wait, 60)
        return malformed

    return Starlette(routes=[Route(route, answer, methods=["POST"])])


@contextmanager
def _dead() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@contextmanager
def failing_hookgate(mode: str, route: str, malformed: Response) -> Iterator[str]:
    """The base URL of a hookgate failing as ``mode`` on ``route``."""
    if mode == "down":
        with _dead() as url:
            yield url
        return
    released = threading.Event()
    fake = LoopbackServer(failing_app(route, mode, released, malformed))
    try:
        yield fake.start()
    finally:
        released.set()
        fake.stop()


@pytest.fixture
def dead_url() -> Iterator[str]:
    """A loopback URL nothing listens on while the test runs."""
    with _dead() as url:
        yield url
