"""A scripted model for CrewAI, written from its BaseLLM interface: each call returns the next
ReAct step ("Action: ... / Action Input: {...}" or "Final Answer: ...", or a callable that
returns one when it is due); every message list it got is kept, so a test can read what the
model was shown."""

from __future__ import annotations

import json
from typing import Any

from crewai.llms.base_llm import BaseLLM


def act(tool: str, arguments: dict[str, Any]) -> str:
    return f"Thought: use {tool}\nAction: {tool}\nAction Input: {json.dumps(arguments)}"


def answer(text: str = "done") -> str:
    return f"Thought: I now know the final answer\nFinal Answer: {text}"


def native_call(tool: str, arguments: dict[str, Any], call_id: str = "call_1") -> list[Any]:
    """A step in the provider's own tool-call shape (OpenAI's), for native function calling."""
    return [{"id": call_id, "type": "function",
             "function": {"name": tool, "arguments": json.dumps(arguments)}}]


class ScriptedLLM(BaseLLM):
    def __init__(self, steps: list[Any], *, native: bool = False) -> None:
        super().__init__(model="scripted")
        self._steps = list(steps)
        self._native = native
        self.seen: list[str] = []
        self.said: list[str] = []  # the assistant's turns, observations appended

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None,
             available_functions: Any = None, from_task: Any = None, from_agent: Any = None,
             response_model: Any = None) -> Any:
        self.seen.append(messages if isinstance(messages, str) else "\n".join(
            str(m.get("content")) for m in messages))
        self.said = [] if isinstance(messages, str) else [
            str(m.get("content")) for m in messages if m.get("role") == "assistant"]
        step = self._steps.pop(0) if self._steps else answer()
        return step() if callable(step) else step  # a callable: the model takes its time

    def supports_function_calling(self) -> bool:
        return self._native  # else the ReAct text protocol

    def observations(self) -> list[str]:
        """What the tools' observations said, as the model was shown them last."""
        return [turn.split("Observation: ", 1)[1] for turn in self.said
                if "Observation: " in turn]

    def saw(self, text: str) -> bool:
        return any(text in messages for messages in self.seen)
