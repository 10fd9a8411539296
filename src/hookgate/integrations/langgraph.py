"""LangChain v1 / LangGraph: an agent middleware that puts every tool call through a hookgate
guard (a server's ``/api/v1`` through hookgate.client, or the in-process guard).

``HookgateMiddleware(guard, agent="payer")`` goes in ``create_agent(..., middleware=[...])``.
Each call is asked before it runs (``wrap_tool_call`` / ``awrap_tool_call``): allowed, it runs
with the arguments hookgate gives (the model is told of an approver's note); denied, it does
not run and the model gets the reason; pending, it becomes a LangGraph ``interrupt()`` (the
checkpointer holds the pause; the process may exit), resumed with ``Command(resume=...)``
built by `resume_when_decided`. On resume the middleware asks hookgate again, so a resume
value can never allow a call by itself. The result goes back through hookgate and the model
sees only the observation it returns. A thread's first turn starts a hookgate session (the
SessionStart hooks' context is added for the model; a session they stop ends the run). The
session is the graph's ``thread_id``; subgraphs
and sub-agents built with the same middleware go through the same gate. hookgate
unreachable: the call does not run and GuardUnavailable says why (fail closed).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware, hook_config
from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, interrupt

from hookgate.client import (
    Allowed,
    AlreadyRan,
    AsyncGuard,
    Decided,
    Denied,
    Guard,
    GuardUnavailable,
    Pending,
    SessionStarted,
    Verdict,
)

__all__ = ["FRAMEWORK", "HookgateMiddleware", "aresume_when_decided", "resume_when_decided"]
FRAMEWORK = "langgraph"
#: The key of a hookgate interrupt's value (and of the resume value built for it).
INTERRUPT_KEY = "hookgate"
Handler = Callable[[ToolCallRequest], ToolMessage | Command[Any]]
AsyncHandler = Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]


def _session(request: ToolCallRequest | None) -> str:
    config = getattr(request.runtime, "config", None) if request is not None else get_config()
    thread = ((config or {}).get("configurable") or {}).get("thread_id")
    if not thread:
        raise GuardUnavailable("the graph runs without a thread_id, so hookgate cannot name "
                               "the session; run it with a checkpointer and a thread_id")
    return str(thread)


def _declared(request: ToolCallRequest) -> dict[str, Any]:
    # The tool's own description and JSON schema: approvers see them, and an edit is
    # checked against the schema (without one, a person can approve or reject, not edit).
    tool = request.tool
    if tool is None:
        return {}
    try:
        schema = tool.tool_call_schema.model_json_schema()  # type: ignore[union-attr]
    except (AttributeError, TypeError, ValueError):
        schema = None
    return {"description": tool.description or None,
            "parameters": schema if isinstance(schema, dict) and
            schema.get("type") == "object" else None}


def _pause(verdict: Pending) -> None:
    interrupt({INTERRUPT_KEY: {"call": verdict.call, "request_id": verdict.request_id,
                               "reason": verdict.reason}})


def _message(request: ToolCallRequest, text: str, *, error: bool = False) -> ToolMessage:
    call = request.tool_call
    return ToolMessage(content=text, tool_call_id=str(call.get("id")), name=call.get("name"),
                       status="error" if error else "success")


def _ran(result: ToolMessage | Command[Any]) -> tuple[Any, str | None]:
    if isinstance(result, ToolMessage):
        if result.status == "error":
            return None, str(result.content)
        return result.content, None
    return str(result), None


class HookgateMiddleware(AgentMiddleware):
    """Every tool call of the agent through hookgate (see the module text)."""

    def __init__(self, guard: Guard | AsyncGuard, *, agent: str,
                 wait_s: float = 0.0) -> None:
        super().__init__()
        self.guard = guard
        self.agent = agent
        #: How long one ask waits for a person before the call becomes an interrupt.
        self.wait_s = wait_s
        self._async = inspect.iscoroutinefunction(guard.before_call)

    # -- the session -------------------------------------------------------------------------

    @hook_config(can_jump_to=["end"])
    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """The thread's first turn starts a hookgate session: its SessionStart hooks' context
        is added for the model; a session they stop ends the run."""
        if self._async:
            raise TypeError("this middleware holds an async guard: run the agent with "
                            "ainvoke/astream, or give it a sync guard")
        if not _first_turn(state):
            return None
        guard: Guard = self.guard  # type: ignore[assignment]
        return _started(guard.start_session(agent=self.agent, session_id=_session(None)))

    @hook_config(can_jump_to=["end"])
    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if not _first_turn(state):
            return None
        return _started(await self._ask("start_session", agent=self.agent,
                                        session_id=_session(None)))

    # -- sync ------------------------------------------------------------------------------

    def wrap_tool_call(self, request: ToolCallRequest, handler: Handler
                       ) -> ToolMessage | Command[Any]:
        if self._async:
            raise TypeError("this middleware holds an async guard: run the agent with "
                            "ainvoke/astream, or give it a sync guard")
        guard: Guard = self.guard  # type: ignore[assignment]
        call = request.tool_call
        verdict: Verdict = guard.before_call(
            agent=self.agent, session_id=_session(request), call_id=str(call.get("id")),
            tool=str(call.get("name")), arguments=dict(call.get("args") or {}),
            **_declared(request))
        while isinstance(verdict, Pending):
            if self.wait_s > 0:
                verdict = guard.wait(verdict.call, timeout=self.wait_s)
                if not isinstance(verdict, Pending):
                    break
            _pause(verdict)  # raises on the first run; returns the resume value after
            verdict = guard.wait(verdict.call, timeout=0)
        if not isinstance(verdict, Allowed):
            return self._settled(request, verdict)
        result = handler(request.override(tool_call={**call, "args": verdict.arguments}))
        output, error = _ran(result)
        seen = guard.report(verdict.call, output=output, error=error)
        return self._observed(request, verdict, result, seen.text, seen.withheld)

    # -- async -----------------------------------------------------------------------------

    async def awrap_tool_call(self, request: ToolCallRequest, handler: AsyncHandler
                              ) -> ToolMessage | Command[Any]:
        call = request.tool_call
        verdict = await self._ask(
            "before_call", agent=self.agent, session_id=_session(request),
            call_id=str(call.get("id")), tool=str(call.get("name")),
            arguments=dict(call.get("args") or {}), **_declared(request))
        while isinstance(verdict, Pending):
            pending = verdict
            if self.wait_s > 0:
                verdict = await self._ask("wait", pending.call, timeout=self.wait_s)
                if not isinstance(verdict, Pending):
                    break
            _pause(pending)
            verdict = await self._ask("wait", pending.call, timeout=0)
        if not isinstance(verdict, Allowed):
            return self._settled(request, verdict)
        result = await handler(request.override(tool_call={**call, "args": verdict.arguments}))
        output, error = _ran(result)
        allowed = verdict
        seen = await self._ask("report", allowed.call, output=output, error=error)
        return self._observed(request, verdict, result, seen.text, seen.withheld)

    async def _ask(self, method: str, *args: Any, **kwargs: Any) -> Any:
        bound = getattr(self.guard, method)
        if self._async:
            return await bound(*args, **kwargs)
        return await asyncio.to_thread(bound, *args, **kwargs)

    # -- shared ----------------------------------------------------------------------------

    @staticmethod
    def _settled(request: ToolCallRequest, verdict: Verdict) -> ToolMessage:
        if isinstance(verdict, AlreadyRan):
            return _message(request, verdict.observation)
        assert isinstance(verdict, Denied)
        return _message(request, f"hookgate did not run this call: {verdict.reason}",
                        error=True)

    @staticmethod
    def _observed(request: ToolCallRequest, verdict: Allowed, result: ToolMessage | Command[Any],
                  text: str, withheld: bool) -> ToolMessage | Command[Any]:
        if isinstance(result, Command) and not withheld:
            return result
        if verdict.note:
            text = f"{text}\n\n[hookgate: {verdict.note}]"
        return _message(request, text, error=withheld)


def _first_turn(state: Any) -> bool:
    messages = state.get("messages", []) if isinstance(state, Mapping) else []
    return not any(isinstance(m, AIMessage | ToolMessage) for m in messages)


def _started(started: SessionStarted) -> dict[str, Any] | None:
    if started.stopped:
        return {"jump_to": "end",
                "messages": [AIMessage(content=f"hookgate stopped this session: "
                                               f"{started.stopped}")]}
    if started.context:
        return {"messages": [SystemMessage(content=started.context)]}
    return None


def _pending_calls(interrupts: Any) -> list[str]:
    found = []
    for item in interrupts or ():
        value = getattr(item, "value", item)
        if isinstance(value, Mapping) and isinstance(value.get(INTERRUPT_KEY), Mapping):
            found.append(str(value[INTERRUPT_KEY]["call"]))
    return found


def resume_when_decided(guard: Guard, interrupts: Any, *, timeout: float
                        ) -> Command[Any] | None:
    """The ``Command(resume=...)`` for a paused graph's hookgate interrupts (``result
    ["__interrupt__"]`` or ``graph.get_state(config).interrupts``), once hookgate decided
    them: waits up to ``timeout`` seconds (long-poll); None while one is still pending."""
    decisions: dict[str, Any] = {}
    for call in _pending_calls(interrupts):
        decided = guard.decision(call, timeout=timeout)
        if isinstance(decided, Pending):
            return None
        decisions[call] = _said(decided)
    return _command(interrupts, decisions)


async def aresume_when_decided(guard: AsyncGuard, interrupts: Any, *,
                               timeout: float,  # noqa: ASYNC109
                               ) -> Command[Any] | None:
    """`resume_when_decided` for an AsyncGuard."""
    decisions: dict[str, Any] = {}
    for call in _pending_calls(interrupts):
        decided = await guard.decision(call, timeout=timeout)
        if isinstance(decided, Pending):
            return None
        decisions[call] = _said(decided)
    return _command(interrupts, decisions)


def _said(decided: Decided | AlreadyRan) -> str:
    if isinstance(decided, AlreadyRan):
        return "already_ran"
    return "approved" if decided.approved else "rejected"


def _command(interrupts: Any, decisions: Mapping[str, Any]) -> Command[Any]:
    # One resume value per interrupt id when several wait; the middleware asks hookgate
    # again on resume, so the value only says which decision woke it.
    by_id = {}
    for item in interrupts or ():
        value = getattr(item, "value", None)
        key = value.get(INTERRUPT_KEY) if isinstance(value, Mapping) else None
        if isinstance(key, Mapping) and getattr(item, "id", None):
            by_id[item.id] = {INTERRUPT_KEY: {"call": key["call"],
                                              "decision": decisions.get(key["call"])}}
    if len(by_id) == 1:
        return Command(resume=next(iter(by_id.values())))
    return Command(resume=by_id)
