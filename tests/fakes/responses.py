"""A loopback fake of the OpenAI Responses API, streaming, for driving the real Codex CLI.

Written from the documented protocol (CODING_AGENTS.md): ``POST /v1/responses`` is answered
with Server-Sent Events ``response.created``, ``response.output_item.added`` and
``response.output_text.delta`` for text, ``response.output_item.done`` with the whole item
(a ``message`` or a ``function_call`` whose ``arguments`` is a JSON string) and
``response.completed`` with ``usage``. What the model "says" comes from a script: a function of
the request body returning text or a function call. Tool results come back as input items of
type ``function_call_output``.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.server import LoopbackServer


@dataclass(frozen=True)
class Call:
    """A function call the model makes (``arguments`` are sent as a JSON string)."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Say:
    text: str


Turn = Call | Say
Script = Callable[[dict[str, Any]], Turn]


def outputs(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ``function_call_output`` input item of a request."""
    items = body.get("input")
    return [i for i in items if isinstance(i, dict) and i.get("type") ==
            "function_call_output"] if isinstance(items, list) else []


def output_text(item: dict[str, Any]) -> str:
    out = item.get("output")
    if isinstance(out, str):
        return out
    if isinstance(out, list):
        return "\n".join(str(p.get("text", "")) for p in out if isinstance(p, dict))
    return json.dumps(out)


def sequence(*turns: Turn,
             results: Callable[[dict[str, Any]], list[Any]] | None = None) -> Script:
    """Answer turn N (counted by tool outputs so far; ``results`` lists them in another
    API's request) with turns[N]; then "done"."""
    def script(body: dict[str, Any]) -> Turn:
        n = len((results or outputs)(body))
        return turns[n] if n < len(turns) else Say("done")
    return script


class FakeResponses:
    """The fake; ``requests`` keeps the body of every /responses request."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.server = LoopbackServer(Starlette(routes=[
            Route("/v1/responses", self._responses, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
        ]))

    def __enter__(self) -> FakeResponses:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    @property
    def base_url(self) -> str:
        return f"{self.server.url}/v1"

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [], "models": []})

    async def _responses(self, request: Request) -> Response:
        if not request.headers.get("authorization"):
            return JSONResponse({"error": {"message": "no key"}}, status_code=401)
        body = await request.json()
        with self._lock:
            self.requests.append(body)
        turn = self.script(body)
        return StreamingResponse(_events(turn, str(body.get("model", "gpt-5"))),
                                 media_type="text/event-stream")


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps({'type': event, **data})}\n\n".encode()


def _events(turn: Turn, model: str) -> Iterator[bytes]:
    rid = f"resp_{uuid.uuid4().hex[:20]}"
    yield _sse("response.created", {"response": {"id": rid, "object": "response",
                                                 "model": model, "status": "in_progress",
                                                 "output": []}})
    if isinstance(turn, Call):
        item: dict[str, Any] = {"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:16]}",
                                "call_id": f"call_{uuid.uuid4().hex[:16]}",
                                "name": turn.name, "arguments": json.dumps(turn.arguments),
                                "status": "completed"}
        yield _sse("response.output_item.added", {"output_index": 0,
                                                  "item": dict(item, arguments="")})
    else:
        mid = f"msg_{uuid.uuid4().hex[:16]}"
        yield _sse("response.output_item.added", {"output_index": 0, "item": {
            "type": "message", "id": mid, "role": "assistant", "status": "in_progress",
            "content": []}})
        yield _sse("response.output_text.delta", {"output_index": 0, "content_index": 0,
                                                  "item_id": mid, "delta": turn.text})
        item = {"type": "message", "id": mid, "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}]}
    yield _sse("response.output_item.done", {"output_index": 0, "item": item})
    yield _sse("response.completed", {"response": {
        "id": rid, "object": "response", "model": model, "status": "completed",
        "output": [item],
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 15}}})
