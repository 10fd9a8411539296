"""LangGraph's resume behind hookgate's HTTP contract: a FastAPI app under uvicorn (hookgate's
own `uvicorn_config`) whose respond route takes the body of hookgate's
``POST /api/confirmations/{id}/respond`` and resumes the parked thread with
``graph.ainvoke(Command(resume=...))`` on an AsyncPostgresSaver.

    python -m peers.langgraph_server --port PORT --dsn DSN --stamps FILE

``POST /api/runs`` parks a new thread at its interrupt and answers its ``run_id`` and
``request_id`` (the thread); the tool's first line appends the wall-clock time to FILE, as
hookgate's bench tool does.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool as lc_tool
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from hookgate.server.serving import Server, uvicorn_config


class Decision(BaseModel):
    """hookgate's respond body (its other fields are accepted and unused here)."""

    decision: str
    reason: str | None = None


class NewRun(BaseModel):
    agent_id: str = "clerk"
    message: str = "go"


def one_tool_graph(checkpointer: Any, tool: Any, gated: bool) -> Any:
    """model -> tools -> model -> end, the model scripted: a call of ``tool`` (no arguments
    beyond ``args`` below), then an answer; ``gated``: the tools node interrupts first and
    runs the tool only when resumed with a truthy value."""
    args = {"ref": "r"} if "ref" in tool.args else {}

    def model(state: MessagesState) -> dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage(content="done")]}
        return {"messages": [AIMessage(content="", tool_calls=[
            {"name": tool.name, "args": args, "id": f"call_{uuid.uuid4().hex[:8]}"}])]}

    tools = ToolNode([tool])

    async def act(state: MessagesState) -> dict[str, Any]:
        if gated and not interrupt({"tool": tool.name}):
            return {"messages": [AIMessage(content="refused")]}
        return await tools.ainvoke(state)

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", act)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=checkpointer)


def gated_graph(checkpointer: Any, stamps: str) -> Any:
    """The gated one-tool graph whose tool appends its start time to ``stamps``."""
    @lc_tool
    def stamp(ref: str) -> str:
        """Record when the tool started."""
        started = time.time()
        with open(stamps, "a", encoding="utf-8") as f:
            f.write(f"{started:.6f}\n")
        return f"stamped {ref}"

    return one_tool_graph(checkpointer, stamp, gated=True)


def create_app(dsn: str, stamps: str) -> FastAPI:
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with AsyncConnectionPool(dsn, min_size=4, max_size=4, open=False, kwargs={
                "autocommit": True, "prepare_threshold": 0,
                "row_factory": dict_row}) as pool:
            await pool.wait()
            saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
            await saver.setup()
            state["graph"] = gated_graph(saver, stamps)
            yield

    app = FastAPI(lifespan=lifespan)

    @app.get("/")
    async def ready() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/api/runs")
    async def start(body: NewRun) -> dict[str, str]:
        thread = uuid.uuid4().hex
        out = await state["graph"].ainvoke(
            {"messages": [HumanMessage(body.message)]},
            {"configurable": {"thread_id": thread}}, durability="sync")
        if "__interrupt__" not in out:
            raise HTTPException(500, "the run did not stop at its interrupt")
        return {"run_id": thread, "request_id": thread}

    @app.post("/api/confirmations/{request_id}/respond")
    async def respond(request_id: str, body: Decision) -> dict[str, str]:
        if body.decision not in ("approve", "deny"):
            raise HTTPException(422, f"unknown decision {body.decision!r}")
        await state["graph"].ainvoke(Command(resume=body.decision == "approve"),
                                     {"configurable": {"thread_id": request_id}},
                                     durability="sync")
        return {"status": "decided", "decision": body.decision}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--stamps", required=True)
    options = parser.parse_args()
    config = uvicorn_config(create_app(options.dsn, options.stamps), "127.0.0.1",
                            options.port)
    asyncio.run(Server(config).serve())


if __name__ == "__main__":
    main()
