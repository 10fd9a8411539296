"""One LangChain agent on a PostgreSQL checkpointer, for the restart test: run as a script it
starts the thread and exits at hookgate's interrupt (printing the request id); imported, it
builds the same agent again to resume."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from hookgate.client import Client
from hookgate.integrations.langgraph import HookgateMiddleware

RAN: list[int] = []


@tool
def transfer(amount: int, to: str) -> str:
    """Send money."""
    RAN.append(amount)
    return f"sent {amount} to {to}"


class ScriptedModel(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **_: Any) -> ScriptedModel:  # type: ignore[override]
        return self


@asynccontextmanager
async def agent(pg_url: str, hookgate_url: str, token: str) -> AsyncIterator[Any]:
    model = ScriptedModel(messages=iter([
        AIMessage(content="", tool_calls=[{"name": "transfer", "args": {"amount": 3, "to": "b"},
                                           "id": "call-restart-1"}]),
        AIMessage(content="done")]))
    async with AsyncPostgresSaver.from_conn_string(pg_url) as saver:
        await saver.setup()
        guard = Client(hookgate_url, token, framework="langgraph")
        yield create_agent(model, tools=[transfer],
                           middleware=[HookgateMiddleware(guard, agent="payer")],
                           checkpointer=saver), guard
        guard.close()


async def _start(pg_url: str, hookgate_url: str, token: str) -> None:
    async with agent(pg_url, hookgate_url, token) as (graph, _):
        paused = await graph.ainvoke({"messages": [("user", "go")]},
                                     {"configurable": {"thread_id": "restart"}})
        print(paused["__interrupt__"][0].value["hookgate"]["request_id"], flush=True)


if __name__ == "__main__":
    asyncio.run(_start(*sys.argv[1:4]))
