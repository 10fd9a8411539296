"""`ScriptedLLM`: an offline model that plays back turns, for the demo, tests and evals.

The turn to play is chosen from the conversation (how many assistant turns it already
has), not from a counter, so a run resumed in a fresh process continues the script.
A turn is ``{"tool_calls": [...]}``, ``{"answer": str}``, or for the DAG engine
``{"plan": {"steps": [...]}}`` (the shape is in `hookgate.engines.plan`).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from hookgate.llm.base import Message, ModelError, ModelTurn
from hookgate.telemetry.models import traced_chat
from hookgate.tools.calls import ToolCall

Turn = dict[str, Any]
TurnFunction = Callable[[list[Message]], Turn | Awaitable[Turn]]


def parse_turn(turn: Any, index: int) -> ModelTurn:
    """Check a scripted turn's shape and turn it into a ModelTurn."""
    if not isinstance(turn, dict):
        raise ModelError(f"scripted turn {index} must be a mapping, got {type(turn).__name__}")
    unknown = set(turn) - {"tool_calls", "answer", "plan"}
    if unknown:
        raise ModelError(f"scripted turn {index}: unknown keys {', '.join(sorted(unknown))}")
    if "plan" in turn:
        # The DAG engine checks the plan's contents; here only its outer shape.
        if not isinstance(turn["plan"], dict):
            raise ModelError(f"scripted turn {index}: 'plan' must be a mapping with 'steps'")
        return ModelTurn(plan=turn["plan"], content=json.dumps({"plan": turn["plan"]},
                                                               ensure_ascii=False, default=str))
    if "answer" in turn:
        return ModelTurn(answer=str(turn["answer"]))
    calls = turn.get("tool_calls")
    if not isinstance(calls, list) or not calls:
        raise ModelError(f"scripted turn {index} needs 'answer' or a non-empty 'tool_calls' list")
    out = []
    for j, call in enumerate(calls):
        if not isinstance(call, dict) or "name" not in call:
            raise ModelError(f"scripted turn {index}, call {j}: needs a 'name'")
        out.append(
            ToolCall(
                id=str(call.get("id") or f"call_{index}_{j}"),
                name=call["name"],
                args=call.get("args", {}),
            )
        )
    return ModelTurn(tool_calls=out)


class ScriptedLLM:
    """Plays ``turns`` in order, or asks ``turns(messages)`` for each turn."""

    def __init__(self, turns: Sequence[Turn] | TurnFunction) -> None:
        if not callable(turns) and not isinstance(turns, Sequence):
            raise TypeError("ScriptedLLM takes a list of turns or a callable(messages) -> turn")
        self._turns = turns
        self.calls = 0

    @traced_chat("hookgate.scripted")
    async def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> ModelTurn:
        index = sum(1 for m in messages if m.get("role") == "assistant")
        self.calls += 1
        if callable(self._turns):
            turn = self._turns([dict(m) for m in messages])
            if inspect.isawaitable(turn):
                turn = await turn
            return parse_turn(turn, index)
        if index >= len(self._turns):
            raise ModelError(
                f"the script has {len(self._turns)} turns and the run asked for turn {index + 1}"
            )
        return parse_turn(self._turns[index], index)
