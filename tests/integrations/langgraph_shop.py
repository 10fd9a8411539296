"""The LangChain side of tests/integrations/test_langgraph.py: tools that record what really
ran (``RAN``), a scripted chat model, and an agent run to its first pause. A module of its
own, imported by the tests that use it, so collecting the tests does not import LangChain."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, NotRequired

from langchain.agents import AgentState, create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from hookgate.client import Client
from hookgate.integrations.langgraph import HookgateMiddleware

RAN: list[tuple[str, dict[str, Any]]] = []


@tool
def transfer(amount: int, to: str) -> str:
    """Send money."""
    RAN.append(("transfer", {"amount": amount, "to": to}))
    return f"sent {amount} to {to}"


@tool
def lookup(name: str) -> str:
    """Look a customer up."""
    RAN.append(("lookup", {"name": name}))
    return f"{name}: card 4111 1111 1111 1111"


@tool
def profile(name: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """A customer's profile, straight into the conversation (a LangGraph Command)."""
    RAN.append(("profile", {"name": name}))
    return Command(update={"messages": [ToolMessage(f"{name}: card 4111 1111 1111 1111",
                                                    tool_call_id=tool_call_id)],
                           "profiled": name})


@tool
def profile_message(name: str, tool_call_id: Annotated[str, InjectedToolCallId]
                    ) -> ToolMessage:
    """A customer's profile as the tool's own ToolMessage."""
    RAN.append(("profile_message", {"name": name}))
    return ToolMessage(f"{name}: card 4111 1111 1111 1111", tool_call_id=tool_call_id,
                       artifact={"card": "4111 1111 1111 1111"})


class ScriptedModel(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **_: Any) -> ScriptedModel:  # type: ignore[override]
        return self


def model(*turns: AIMessage) -> ScriptedModel:
    return ScriptedModel(messages=iter([*turns, AIMessage(content="done")]))


def calls(name: str, args: dict[str, Any]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args,
                                              "id": f"call-{uuid.uuid4().hex[:8]}"}])


def tool_texts(result: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in result["messages"] if isinstance(m, ToolMessage)]


def run_paused(guard: Client, agent_id: str, *turns: AIMessage) -> tuple[Any, dict[str, Any],
                                                                          dict[str, Any]]:
    graph = create_agent(model(*turns), tools=[transfer, lookup],
                         middleware=[HookgateMiddleware(guard, agent=agent_id)],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}
    return graph, config, graph.invoke({"messages": [("user", "go")]}, config)


class ProfiledState(AgentState[Any]):
    profiled: NotRequired[str]

