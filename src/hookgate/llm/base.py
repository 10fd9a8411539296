"""What an engine needs from a model: given the messages and tools, the next turn."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from hookgate.tools.calls import ToolCall

Message = dict[str, Any]


class ModelError(Exception):
    """The model could not produce a turn (endpoint down, bad reply, script exhausted)."""


@dataclass(slots=True, frozen=True)
class ResponseInfo:
    """What an endpoint said about its reply besides the turn (for telemetry and logs)."""

    id: str | None = None
    model: str | None = None
    finish_reasons: tuple[str, ...] = ()
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(slots=True)
class ModelTurn:
    """One model turn: tool calls to make, or a final answer.

    ``plan`` is set when a scripted model plays a plan turn for the DAG engine; other
    models write their plan as JSON in the answer text (see `hookgate.engines.plan`).
    """

    tool_calls: list[ToolCall] = field(default_factory=list)
    answer: str | None = None
    content: str | None = None
    plan: dict[str, Any] | None = None
    response: ResponseInfo | None = None


class ChatModel(Protocol):
    """Anything that can take the next turn of a conversation."""

    async def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> ModelTurn:
        ...
