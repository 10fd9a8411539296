"""A loopback fake of OpenAI's Chat Completions API with streaming, for driving the real
GitHub Copilot CLI in its offline BYOK mode (``COPILOT_PROVIDER_TYPE=openai``).

Written from the documented wire: ``POST /v1/chat/completions`` with ``"stream": true`` is
answered with Server-Sent Events, one ``chat.completion.chunk`` per ``data:`` line — the
assistant's role, then its text (``delta.content``) or one tool call (``delta.tool_calls``
with ``id``, ``function.name`` and ``function.arguments`` as a JSON string), then a chunk with
``finish_reason`` (``stop`` or ``tool_calls``) and ``usage`` — and ``data: [DONE]``. What the
model "says" comes from a script over the request body (`Call` or `Say`, as for the
Responses fake). Tool results come back as messages of role ``tool``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.responses import Call, FakeResponses, Say, Script, Turn
from tests.fakes.server import LoopbackServer

__all__ = ["Call", "FakeChatStream", "Say", "sequence", "tool_results"]


def tool_results(body: dict[str, Any]) -> list[str]:
    """The text of every ``tool`` message of a request, in order."""
    out: list[str] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict) or message.get("role") != "tool":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(str(p.get("text", "")) for p in content
                                if isinstance(p, dict))
        out.append(content if isinstance(content, str) else json.dumps(content))
    return out


def sequence(*turns: Turn) -> Script:
    """Answer turn N (counted by tool results so far) with turns[N]; then "done"."""
    def script(body: dict[str, Any]) -> Turn:
        n = len(tool_results(body))
        return turns[n] if n < len(turns) else Say("done")
    return script


class FakeChatStream(FakeResponses):
    """The fake; ``requests`` keeps the body of every chat-completions request."""

    def __init__(self, script: Script, *, api_key: str) -> None:
        super().__init__(script)
        self.api_key = api_key
        self.server = LoopbackServer(Starlette(routes=[
            Route("/v1/chat/completions", self._completions, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
        ]))

    def seen(self) -> list[str]:
        """The tool results the model read last, in order."""
        return tool_results(self.requests[-1]) if self.requests else []

    async def _completions(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return JSONResponse({"error": {"message": "Incorrect API key provided."}},
                                status_code=401)
        body = await request.json()
        with self._lock:
            self.requests.append(body)
        turn = self.script(body)
        model = str(body.get("model", "gpt-4.1"))
        if not body.get("stream"):
            return JSONResponse({"error": {"message": "this fake only streams"}},
                                status_code=400)
        return StreamingResponse(_chunks(turn, model), media_type="text/event-stream")


def _chunk(cid: str, model: str, delta: dict[str, Any], finish: str | None = None,
           **extra: Any) -> bytes:
    data = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "delta": delta,
                                         "finish_reason": finish}], **extra}
    return f"data: {json.dumps(data)}\n\n".encode()


def _chunks(turn: Turn, model: str) -> Iterator[bytes]:
    cid = f"chatcmpl-{uuid.uuid4().hex[:20]}"
    yield _chunk(cid, model, {"role": "assistant", "content": ""})
    if isinstance(turn, Call):
        yield _chunk(cid, model, {"tool_calls": [{
            "index": 0, "id": f"call_{uuid.uuid4().hex[:16]}", "type": "function",
            "function": {"name": turn.name, "arguments": json.dumps(turn.arguments)}}]})
        finish = "tool_calls"
    else:
        yield _chunk(cid, model, {"content": turn.text})
        finish = "stop"
    yield _chunk(cid, model, {}, finish, usage={"prompt_tokens": 10, "completion_tokens": 5,
                                                "total_tokens": 15})
    yield b"data: [DONE]\n\n"
