"""A loopback fake of the Gemini API's streaming endpoint, for driving the real Gemini CLI.

Written from the documented protocol (CODING_AGENTS.md): ``POST /v1beta/models/<model>:
streamGenerateContent?alt=sse`` (key in ``x-goog-api-key``) is answered with Server-Sent
Events, each ``data:`` line a ``GenerateContentResponse`` whose candidate's content parts hold
text or a ``functionCall {name, args}``. What the model "says" comes from a script of the
request body (the `Call` and `Say` turns of tests/fakes/responses.py); tool results come back
as ``functionResponse`` parts of the next request's ``contents``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes import responses
from tests.fakes.responses import Call, Say, Script, Turn
from tests.fakes.server import LoopbackServer

__all__ = ["Call", "FakeGemini", "Say", "function_responses", "sequence"]


def function_responses(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``response`` object of every ``functionResponse`` part of a request, in order."""
    out: list[dict[str, Any]] = []
    for content in body.get("contents") or []:
        for part in content.get("parts") or [] if isinstance(content, dict) else []:
            if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
                out.append(part["functionResponse"].get("response") or {})
    return out


def sequence(*turns: Turn) -> Script:
    """Answer turn N (counted by tool results so far) with turns[N]; then "done"."""
    return responses.sequence(*turns, results=function_responses)


class FakeGemini:
    """The fake; ``requests`` keeps the body of every generateContent request."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.server = LoopbackServer(Starlette(routes=[
            Route("/v1beta/models/{rest:path}", self._models, methods=["POST", "GET"]),
        ]))

    def __enter__(self) -> FakeGemini:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    @property
    def base_url(self) -> str:
        """What GOOGLE_GEMINI_BASE_URL is set to (no /v1beta)."""
        return self.server.url

    async def _models(self, request: Request) -> Response:
        if not request.headers.get("x-goog-api-key"):
            return JSONResponse({"error": {"code": 401, "message": "no key"}},
                                status_code=401)
        rest = request.path_params["rest"]
        body = await request.json() if request.method == "POST" else {}
        if rest.endswith(":countTokens"):
            return JSONResponse({"totalTokens": 10})
        if not rest.endswith(":streamGenerateContent"):
            turn: Turn = Say("done")
            return JSONResponse(_response(turn))
        with self._lock:
            self.requests.append(body)
        turn = self.script(body)
        return StreamingResponse(_events(turn), media_type="text/event-stream")


def _response(turn: Turn) -> dict[str, Any]:
    part: dict[str, Any] = ({"functionCall": {"name": turn.name, "args": turn.arguments}}
                            if isinstance(turn, Call) else {"text": turn.text})
    return {"candidates": [{"content": {"role": "model", "parts": [part]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                              "totalTokenCount": 15},
            "modelVersion": "gemini-2.5-flash"}


def _events(turn: Turn) -> Iterator[bytes]:
    yield f"data: {json.dumps(_response(turn))}\r\n\r\n".encode()
