"""A framework adapter hands the model hookgate's observation of a failed tool, never the raw
error beside it: a Pydantic AI tool that fails with a card number in what it raises (a
``ModelRetry``, the framework's way of talking back to the model, and a plain exception) while
the buyer's PostToolUse hook masks card numbers. What the model is shown, over every turn, is
searched for the number."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import pytest

from hookgate.client.local import AsyncLocalGuard
from tests.adversarial.conftest import Tally
from tests.integrations.conftest import local_guard
from tests.integrations.world import MASK

if TYPE_CHECKING:  # Pydantic AI is imported where it is used: collecting this is cheap
    from pydantic_ai import FunctionToolset
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models.function import AgentInfo

__all__ = ["local_guard"]

FRAMEWORK = "pydantic-ai"
pytestmark = pytest.mark.asyncio(loop_scope="module")
CARD = "4111 1111 1111 1111"


def failing_tools() -> FunctionToolset[Any]:
    from pydantic_ai import FunctionToolset, ModelRetry

    def retry_card() -> str:
        """Charge the card on file."""
        raise ModelRetry(f"card {CARD} was declined; ask for another card")

    def charge_card() -> str:
        """Charge the card on file."""
        raise RuntimeError(f"gateway refused card {CARD}")

    return FunctionToolset([retry_card, charge_card])


class Watching:
    """A model that calls one tool, then answers; every message it is shown is kept."""

    def __init__(self, tool: str) -> None:
        self.tool, self.shown = tool, []

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

        self.shown.append(json.dumps([m.parts for m in messages], default=str))
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart(self.tool, {}, tool_call_id="t0")])
        return ModelResponse(parts=[TextPart("done")])


@pytest.mark.parametrize("tool", ["retry_card", "charge_card"])
async def test_pydantic_ai_never_shows_the_model_a_failed_tools_raw_error(
        tool: str, local_guard: AsyncLocalGuard, attempt: Tally) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    from hookgate.integrations.pydantic_ai import HookgateToolset

    model = Watching(tool)
    toolset = HookgateToolset(failing_tools(), guard=local_guard, agent="buyer",
                              session_id=uuid4().hex)
    agent = Agent(FunctionModel(model.respond), toolsets=[toolset], retries=1)
    try:
        await agent.run("charge it")
    except RuntimeError as exc:  # the plain exception ends the run in the app, as without us
        assert tool == "charge_card", exc
    seen = " ".join(model.shown)
    got_through = CARD.replace(" ", "") in seen.replace(" ", "")
    attempt.record(f"pydantic-ai: the card number in a {tool} error the model is shown",
                   got_through)
    assert not got_through, seen
    if tool == "retry_card":  # the retry reached the model as hookgate's masked observation
        assert f"card {MASK}" in seen and "ModelRetry" not in seen, seen
