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
session is the graph's ``thread_id``; subgraphs built with the same middleware go through
the same gate. A sub-agent's middleware comes from its parent's (``parent.sub_agent(agent=
"researcher")``): its session is ``<thread_id>/researcher``, started with the parent's
session as its parent, so hookgate records the delegation depth its hooks and rules see.
hookgate unreachable or failing: the call does not run and GuardUnavailable says why (fail
closed; ``on_unavailable="tell_model"`` answers the call with the reason instead of stopping
the run).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

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


def _ran(request: ToolCallRequest, result: ToolMessage | Command[Any]
         ) -> tuple[Any, str | None]:
    """What the tool said, for PostToolUse: a ToolMessage's content, or the messages a
    ``Command`` adds (its message for this call alone: that message's content)."""
    if isinstance(result, Command):
        messages = _command_messages(result)
        if messages is None:
            return str(result), None
        own = [m for m in messages if isinstance(m, ToolMessage)
               and m.tool_call_id == str(request.tool_call.get("id"))]
        if len(messages) != 1 or len(own) != 1:
            return [getattr(m, "content", str(m)) for m in messages], None
        result = own[0]
    if result.status == "error":
        return None, str(result.content)
    return result.content, None


def _command_messages(command: Command[Any]) -> list[Any] | None:
    """The messages a ``Command`` adds to the conversation (None: it adds none)."""
    update = command.update
    if isinstance(update, Mapping):
        found = update.get("messages")
    elif isinstance(update, list | tuple):
        found = [v for k, v in update if k == "messages"] or None
        if found is not None and len(found) == 1:
            found = found[0]
    else:
        return None
    if found is None:
        return None
    return list(found) if isinstance(found, list | tuple) else [found]


def _with_messages(command: Command[Any], message: ToolMessage) -> Command[Any]:
    """``command`` adding ``message`` (hookgate's observation) instead of the tool's own."""
    update = command.update
    if isinstance(update, Mapping):
        changed: Any = {**update, "messages": [message]}
    else:
        changed = [(k, v) for k, v in (update or ()) if k != "messages"] + [
            ("messages", [message])]
    return Command(graph=command.graph, update=changed, resume=command.resume,
                   goto=command.goto)


class HookgateMiddleware(AgentMiddleware):
    """Every tool call of the agent through hookgate (see the module text)."""

    def __init__(self, guard: Guard | AsyncGuard, *, agent: str, wait_s: float = 0.0,
                 on_unavailable: Literal["raise", "tell_model"] = "raise") -> None:
        super().__init__()
        self.guard = guard
        self.agent = agent
        #: hookgate unreachable or failing: the call never runs either way; "raise" stops
        #: the run with GuardUnavailable, "tell_model" answers the call with the reason.
        self.on_unavailable = on_unavailable
        #: How long one ask waits for a person before the call becomes an interrupt.
        self.wait_s = wait_s
        self._async = inspect.iscoroutinefunction(guard.before_call)
        #: The agents below the graph's own one, down to this one (empty: the top agent).
        self.lineage: tuple[str, ...] = ()

    def sub_agent(self, *, agent: str, wait_s: float | None = None) -> HookgateMiddleware:
        """The middleware for a sub-agent this agent delegates to: the same guard, a session
        of its own under this one's (hookgate records the delegation and its depth)."""
        child = HookgateMiddleware(self.guard, agent=agent,
                                   wait_s=self.wait_s if wait_s is None else wait_s,
                                   on_unavailable=self.on_unavailable)
        child.lineage = (*self.lineage, agent)
        return child

    def _sessions(self, request: ToolCallRequest | None) -> dict[str, Any]:
        """This agent's session and the one it was delegated from (None: the top agent)."""
        thread = _session(request)
        if not self.lineage:
            return {"session_id": thread}
        return {"session_id": "/".join((thread, *self.lineage)),
                "parent_session": "/".join((thread, *self.lineage[:-1]))}

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
        try:
            return _started(guard.start_session(agent=self.agent, **self._sessions(None)))
        except GuardUnavailable:
            if self.on_unavailable == "raise":
                raise
            return None  # each tool call is answered with the reason

    @hook_config(can_jump_to=["end"])
    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if not _first_turn(state):
            return None
        try:
            return _started(await self._ask("start_session", agent=self.agent,
                                            **self._sessions(None)))
        except GuardUnavailable:
            if self.on_unavailable == "raise":
                raise
            return None

    # -- sync ------------------------------------------------------------------------------

    def wrap_tool_call(self, request: ToolCallRequest, handler: Handler
                       ) -> ToolMessage | Command[Any]:
        try:
            return self._call(request, handler)
        except GuardUnavailable as exc:
            return self._unavailable(request, exc)

    async def awrap_tool_call(self, request: ToolCallRequest, handler: AsyncHandler
                              ) -> ToolMessage | Command[Any]:
        try:
            return await self._acall(request, handler)
        except GuardUnavailable as exc:
            return self._unavailable(request, exc)

    def _unavailable(self, request: ToolCallRequest, exc: GuardUnavailable) -> ToolMessage:
        if self.on_unavailable == "raise":
            raise exc
        return _message(request, f"hookgate: {exc}", error=True)

    def _call(self, request: ToolCallRequest, handler: Handler
              ) -> ToolMessage | Command[Any]:
        if self._async:
            raise TypeError("this middleware holds an async guard: run the agent with "
                            "ainvoke/astream, or give it a sync guard")
        guard: Guard = self.guard  # type: ignore[assignment]
        call = request.tool_call
        verdict: Verdict = guard.before_call(
            agent=self.agent, **self._sessions(request), call_id=str(call.get("id")),
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
        output, error = _ran(request, result)
        try:
            seen = guard.report(verdict.call, output=output, error=error)
        except GuardUnavailable as exc:
            raise _unreviewed(exc) from exc
        return self._observed(request, verdict, result, seen.text, seen.withheld)

    # -- async -----------------------------------------------------------------------------

    async def _acall(self, request: ToolCallRequest, handler: AsyncHandler
                     ) -> ToolMessage | Command[Any]:
        call = request.tool_call
        verdict = await self._ask(
            "before_call", agent=self.agent, **self._sessions(request),
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
        output, error = _ran(request, result)
        allowed = verdict
        try:
            seen = await self._ask("report", allowed.call, output=output, error=error)
        except GuardUnavailable as exc:
            raise _unreviewed(exc) from exc
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
        if verdict.note:
            text = f"{text}\n\n[hookgate: {verdict.note}]"
        message = _message(request, text, error=withheld)
        if isinstance(result, Command) and not withheld and \
                _command_messages(result) is not None:
            # The Command's other updates apply; the model reads hookgate's observation in
            # place of the messages the tool added (withheld: nothing of the Command applies).
            return _with_messages(result, message)
        if isinstance(result, Command) and not withheld:
            return result  # it adds no message: the model reads nothing of it
        return message


def _unreviewed(exc: GuardUnavailable) -> GuardUnavailable:
    # The tool ran, but its result was never reviewed: the model does not see it.
    return GuardUnavailable(f"the tool ran, but hookgate could not review its result, so the "
                            f"model does not see it ({exc})")


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
    """The hookgate calls the interrupts wait on; ValueError if none of them is hookgate's
    (another middleware's interrupt, such as LangChain's human-in-the-loop review, is
    answered as that middleware documents)."""
    found = []
    for item in interrupts or ():
        value = getattr(item, "value", item)
        if isinstance(value, Mapping) and isinstance(value.get(INTERRUPT_KEY), Mapping):
            found.append(str(value[INTERRUPT_KEY]["call"]))
    if not found:
        raise ValueError("none of these interrupts waits for hookgate; answer them as the "
                         "middleware that raised them documents")
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
