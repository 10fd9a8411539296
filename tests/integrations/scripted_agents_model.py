"""A scripted model for the OpenAI Agents SDK, written from its `Model` interface: each turn a
function of the conversation so far decides the next output (a tool call or a message), so the
tests run the real Runner offline."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from agents import Model, ModelResponse, Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)


def tool_call(name: str, arguments: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    """The model calls tool ``name`` with ``arguments``."""
    return ResponseFunctionToolCall(type="function_call", name=name, call_id=call_id,
                                    arguments=json.dumps(arguments), id=f"fc-{call_id}")


def message(text: str) -> ResponseOutputMessage:
    """The model answers with ``text`` (the run's final output)."""
    return ResponseOutputMessage(
        id="msg", type="message", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])])


def tool_outputs(items: Any, prefix: str = "") -> list[str]:
    """The outputs of the tool calls (whose call ids start with ``prefix``) the model has seen
    so far, oldest first."""
    if isinstance(items, str):
        return []
    return [str(item.get("output")) for item in items
            if isinstance(item, dict) and item.get("type") == "function_call_output"
            and str(item.get("call_id", "")).startswith(prefix)]


class ScriptedModel(Model):
    """Answers each turn with ``script(input_items)``."""

    def __init__(self, script: Callable[[Any], Any]) -> None:
        self.script = script

    async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                           **kwargs: Any) -> ModelResponse:
        return ModelResponse(output=[self.script(input)], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the tests run the SDK without streaming")
