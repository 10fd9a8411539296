"""A real chat-completions endpoint on 127.0.0.1 for tests, served by ``LoopbackServer``.

It checks every request the way a strict provider would (bearer key, model, messages,
tools), records it, and answers with whatever its ``respond`` function says::

    with FakeChatCompletions(api_key="k", model="m", respond=tool_then_answer(...)) as fake:
        model = OpenAICompatibleModel(fake.base_url, "k", "m")
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.fakes.server import LoopbackServer


@dataclass
class RawReply:
    """Answer with exactly this status and body (for error and malformed-reply cases)."""

    status: int
    body: Any
    content_type: str = "application/json"


@dataclass
class RecordedRequest:
    """One request the fake received, after it passed the shape checks."""

    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body["messages"])

    def tool_messages(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("role") == "tool"]


#: Given the request body, the assistant message to answer with (``content`` and/or
#: ``tool_calls`` in OpenAI's wire shape), or a RawReply.
Responder = Callable[[dict[str, Any]], "dict[str, Any] | RawReply"]


def tool_call(name: str, args: Any, call_id: str = "call_1") -> dict[str, Any]:
    """An assistant message asking for one tool call; ``args`` may be a dict or raw text."""
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": name, "arguments": arguments}}
        ],
    }


def tool_then_answer(name: str, args: Any, answer_prefix: str = "Done: ") -> Responder:
    """Ask for one tool call; once a tool message is in the conversation, answer with it."""

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        results = [m["content"] for m in body["messages"] if m.get("role") == "tool"]
        if results:
            return {"content": answer_prefix + results[-1]}
        return tool_call(name, args)

    return respond


def _shape_problem(body: Any, model: str) -> tuple[int, str] | None:
    if not isinstance(body, dict):
        return 400, "the body must be a JSON object"
    if body.get("model") != model:
        return 404, f"the model '{body.get('model')}' does not exist"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return 400, "'messages' must be a non-empty list"
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant",
                                                               "tool"):
            return 400, f"messages[{i}] has no valid role"
        if m["role"] == "tool" and not m.get("tool_call_id"):
            return 400, f"messages[{i}]: a tool message needs tool_call_id"
    for i, t in enumerate(body.get("tools", [])):
        fn = t.get("function") if isinstance(t, dict) else None
        if t.get("type") != "function" or not isinstance(fn, dict) or not fn.get("name") \
                or not isinstance(fn.get("parameters"), dict):
            return 400, f"tools[{i}] is not a function tool with name and parameters"
    return None


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error"}},
                        status_code=status)


@dataclass
class FakeChatCompletions:
    """The endpoint; use as a context manager, then point a client at ``base_url``."""

    api_key: str
    model: str
    respond: Responder
    requests: list[RecordedRequest] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server: LoopbackServer | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _completions(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            self.rejected.append("bad key")
            return _error(401, "Incorrect API key provided.")
        try:
            body = json.loads(await request.body())
        except json.JSONDecodeError:
            self.rejected.append("bad json")
            return _error(400, "the body is not JSON")
        problem = _shape_problem(body, self.model)
        if problem is not None:
            self.rejected.append(problem[1])
            return _error(*problem)
        self.requests.append(RecordedRequest(dict(request.headers), body))
        reply = self.respond(body)
        if isinstance(reply, RawReply):
            if isinstance(reply.body, str):
                return PlainTextResponse(reply.body, status_code=reply.status,
                                         media_type=reply.content_type)
            return JSONResponse(reply.body, status_code=reply.status)
        message = {"role": "assistant", "content": None, **reply}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return JSONResponse({
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        })

    def __enter__(self) -> FakeChatCompletions:
        app = Starlette(routes=[Route("/v1/chat/completions", self._completions,
                                      methods=["POST"])])
        self._server = LoopbackServer(app)
        self._server.start()
        self.port = self._server.port
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.stop()


def closed_port_url() -> str:
    """A loopback base URL where nothing listens (the port was free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
