"""A scripted model for Google ADK, written from its BaseLlm interface: each turn is a list
of function calls (name, args[, id]) or a final text; every request it got is kept, so a
test can read what the model was shown. ADK is imported when the first model is built, not
when a test module importing this one is collected."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from google.adk.models.base_llm import BaseLlm

Turn = str | list[tuple[Any, ...]]


def scripted_model(turns: list[Turn]) -> Any:
    """A model answering each request with the next of ``turns`` ("done" once they run out);
    ``results()`` and ``saw(text)`` say what it was shown."""
    return _scripted_model_class()(turns=turns)


@cache
def _scripted_model_class() -> type[BaseLlm]:
    """ADK's `BaseLlm` subclass, built once, when a test first needs it."""
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.genai import types
    from pydantic import Field

    class ScriptedModel(BaseLlm):
        model: str = "scripted"
        turns: list[Turn] = Field(default_factory=list)
        requests: list[LlmRequest] = Field(default_factory=list)

        async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False
                                         ) -> AsyncGenerator[LlmResponse, None]:
            self.requests.append(llm_request)
            turn = self.turns.pop(0) if self.turns else "done"
            if isinstance(turn, str):
                parts = [types.Part(text=turn)]
            else:
                parts = [types.Part(function_call=types.FunctionCall(
                    name=call[0], args=call[1], id=call[2] if len(call) > 2 else None))
                    for call in turn]
            yield LlmResponse(content=types.Content(role="model", parts=parts))

        def results(self) -> list[dict[str, Any]]:
            """The function responses the model was shown in its latest request, in order."""
            if not self.requests:
                return []
            return [dict(part.function_response.response or {})
                    for content in self.requests[-1].contents for part in content.parts or []
                    if part.function_response is not None]

        def saw(self, text: str) -> bool:
            """Whether ``text`` was in anything the model was ever sent."""
            return any(text in str(request.contents) for request in self.requests)

    return ScriptedModel
