"""A hookgate that fails as a coding agent's hook may meet it: ``down`` (nothing listens),
``5xx``, ``hung`` (no answer past every deadline of the hook) or ``malformed`` (a 200 whose
body is not one the agent's hook may pass on: the agent would read it as a failed hook, or
an allow, and run the tool)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from tests.fakes.server import LoopbackServer

MODES = ["down", "5xx", "hung", "malformed"]


@contextmanager
def failing_hookgate(mode: str, route: str, malformed: Any) -> Iterator[str]:
    """The base URL of a hookgate failing as ``mode`` on ``route``."""
    if mode == "down":
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            yield f"http://127.0.0.1:{sock.getsockname()[1]}"
        return
    released = threading.Event()

    async def answer(request: Request) -> Response:
        await request.body()
        if mode == "5xx":
            return PlainTextResponse("Internal Server Error", status_code=500)
        if mode == "hung":  # until the test ends
            await asyncio.to_thread(released.wait, 60)
        return Response(json.dumps(malformed), media_type="application/json")

    fake = LoopbackServer(Starlette(routes=[Route(route, answer, methods=["POST"])]))
    try:
        yield fake.start()
    finally:
        released.set()
        fake.stop()
