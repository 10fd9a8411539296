"""A scripted model for the OpenAI Agents SDK, written from its `Model` interface: each turn a
function of the conversation so far decides the next output (a tool call or a message), so the
tests run the real Runner offline. The SDK is imported on first use, not when a test module
importing this one is collected."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents import Model
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage


def tool_call(name: str, arguments: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    """The model calls tool ``name`` with ``arguments``."""
    from openai.types.responses import ResponseFunctionToolCall

    return ResponseFunctionToolCall(type="function_call", name=name, call_id=call_id,
                                    arguments=json.dumps(arguments), id=f"fc-{call_id}")


def message(text: str) -> ResponseOutputMessage:
    """The model answers with ``text`` (the run's final output)."""
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

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


def scripted_model(script: Callable[[Any], Any]) -> Model:
    """A model that answers each turn with ``script(input_items)``."""
    return _scripted_model_class()(script)


@cache
def _scripted_model_class() -> type[Model]:
    """The SDK's `Model` subclass, built once, when a test first needs it (and the SDK's
    tracing turned off: an offline run has nowhere to send its traces)."""
    from agents import Model, ModelResponse, Usage, set_tracing_disabled

    set_tracing_disabled(True)

    class ScriptedModel(Model):
        def __init__(self, script: Callable[[Any], Any]) -> None:
            self.script = script

        async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                               **kwargs: Any) -> ModelResponse:
            return ModelResponse(output=[self.script(input)], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            raise NotImplementedError("the tests run the SDK without streaming")

    return ScriptedModel
