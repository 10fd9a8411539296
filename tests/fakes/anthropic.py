"""A loopback fake of the Anthropic Messages API, streaming, for driving the real Claude Code.

Written from the documented protocol: ``POST /v1/messages`` with ``stream: true`` is answered
with Server-Sent Events ``message_start``, ``content_block_start``, ``content_block_delta``
(``text_delta`` or ``input_json_delta``), ``content_block_stop``, ``message_delta`` and
``message_stop``. What the model "says" comes from a script: a function of the request body
returning text or a tool use. Side requests the CLI makes (titles, token counts) get a short
text answer so they never consume the script.
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
class ToolUse:
    name: str
    input: dict[str, Any]
    id: str = ""


@dataclass(frozen=True)
class Text:
    text: str


Turn = ToolUse | Text
#: Given the request body of a main-loop call, what the model answers.
Script = Callable[[dict[str, Any]], Turn]


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every tool_result block the CLI sent back in this request's messages."""
    out = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            out.extend(b for b in content if isinstance(b, dict) and b.get("type") ==
                       "tool_result")
    return out


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return ""


def sequence(*turns: Turn) -> Script:
    """Answer turn N of the conversation (counted by tool results so far) with turns[N]."""
    def script(body: dict[str, Any]) -> Turn:
        n = len(tool_results(body))
        return turns[n] if n < len(turns) else Text("done")
    return script


class FakeAnthropic:
    """The fake; ``requests`` keeps the body of every main-loop request."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self.server = LoopbackServer(Starlette(routes=[
            Route("/v1/messages", self._messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", self._count, methods=["POST"]),
        ]))

    def __enter__(self) -> FakeAnthropic:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    @property
    def url(self) -> str:
        return self.server.url

    async def _count(self, request: Request) -> Response:
        return JSONResponse({"input_tokens": 10})

    async def _messages(self, request: Request) -> Response:
        if not request.headers.get("x-api-key") and not request.headers.get("authorization"):
            return JSONResponse({"type": "error", "error": {
                "type": "authentication_error", "message": "no key"}}, status_code=401)
        body = await request.json()
        if not body.get("tools"):
            # A side request (a title, a summary): not part of the scripted conversation.
            turn: Turn = Text("ok")
        else:
            with self._lock:
                self.requests.append(body)
                self.headers.append(dict(request.headers))
            turn = self.script(body)
        model = str(body.get("model", "claude"))
        if not body.get("stream"):
            return JSONResponse(_message(turn, model))
        return StreamingResponse(_events(turn, model), media_type="text/event-stream")


def _message(turn: Turn, model: str) -> dict[str, Any]:
    if isinstance(turn, ToolUse):
        content: list[dict[str, Any]] = [{"type": "tool_use", "id": _tool_id(turn),
                                          "name": turn.name, "input": turn.input}]
        stop = "tool_use"
    else:
        content, stop = [{"type": "text", "text": turn.text}], "end_turn"
    return {"id": f"msg_{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant",
            "model": model, "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


def _tool_id(turn: ToolUse) -> str:
    return turn.id or f"toolu_{uuid.uuid4().hex[:24]}"


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _events(turn: Turn, model: str) -> Iterator[bytes]:
    message = _message(turn, model)
    start = dict(message, content=[], stop_reason=None,
                 usage={"input_tokens": 10, "output_tokens": 1})
    yield _sse("message_start", {"type": "message_start", "message": start})
    if isinstance(turn, ToolUse):
        block = message["content"][0]
        yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "tool_use",
                                                             "id": block["id"],
                                                             "name": block["name"],
                                                             "input": {}}})
        raw = json.dumps(turn.input)
        for i in range(0, len(raw), 20):
            yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "input_json_delta",
                                                         "partial_json": raw[i:i + 20]}})
    else:
        yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}})
        yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta",
                                                     "text": turn.text}})
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield _sse("message_delta", {"type": "message_delta",
                                 "delta": {"stop_reason": message["stop_reason"],
                                           "stop_sequence": None},
                                 "usage": {"output_tokens": 5}})
    yield _sse("message_stop", {"type": "message_stop"})
