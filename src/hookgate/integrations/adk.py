"""Google ADK adapter: every tool call of a Runner goes through hookgate.

`HookgatePlugin` is an ADK plugin (`App(..., plugins=[HookgatePlugin(...)])`): its
before/after tool callbacks ask hookgate (`before_call` / `report`) for the root agent, its
`sub_agents` and every `AgentTool` (which inherits the Runner's plugins). A call a person must
decide pauses the invocation with ADK's own tool confirmation; the app resumes it with
`confirmation_replies(...)` once hookgate has a decision, and hookgate's decision is what runs.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events import Event
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools.agent_tool import AgentTool
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from hookgate.client import (
    AlreadyRan,
    AsyncGuard,
    Denied,
    GuardRefused,
    Pending,
    SessionStarted,
    Verdict,
)

__all__ = ["HookgatePlugin", "PendingCall", "confirmation_replies", "pending_calls"]

# ADK's name for the function call that carries a confirmation request.
CONFIRMATION_CALL = "adk_request_confirmation"

# The hookgate session whose tool call (an AgentTool) is running a sub-agent right now:
# the sub-agent's own session names it as its parent.
_delegating_session: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "hookgate_adk_delegating_session", default=None
)


@dataclass(frozen=True)
class PendingCall:
    """A tool call paused in ADK's tool confirmation until hookgate's request is decided."""

    confirmation_call_id: str   # the id of ADK's `adk_request_confirmation` call
    tool: str
    arguments: dict[str, Any]
    request_id: str             # hookgate's approval request (inbox, CLI, chat)
    reason: str | None


class HookgatePlugin(BasePlugin):
    """Asks hookgate before and after every tool call the Runner makes.

    `agent` is the hookgate agent id the calls belong to; `agents` maps an ADK agent's name
    to another hookgate agent id (a sub-agent with its own rules). `wait_s` long-polls a
    pending call for that many seconds before pausing the invocation.
    """

    def __init__(self, guard: AsyncGuard, *, agent: str,
                 agents: Mapping[str, str] | None = None, wait_s: float = 0.0,
                 name: str = "hookgate") -> None:
        super().__init__(name=name)
        self._guard = guard
        self._agent = agent
        self._agents = dict(agents or {})
        self._wait_s = wait_s
        # hookgate session -> what its SessionStart hooks said
        self._started: dict[str, SessionStarted] = {}
        # (ADK session, function call id) -> hookgate's call id and the note for the model
        self._running: dict[tuple[str, str], tuple[str, str | None]] = {}

    async def before_model_callback(self, *, callback_context: CallbackContext,
                                    llm_request: LlmRequest) -> LlmResponse | None:
        """Start the session (SessionStart hooks) and give the model what they added; a
        session a SessionStart hook stopped gets no model call at all."""
        started = await self._start(callback_context)
        if started.stopped:
            return LlmResponse(content=types.Content(
                role="model", parts=[types.Part(text=started.stopped)]))
        if started.context:
            llm_request.append_instructions([started.context])
        return None

    async def before_tool_callback(self, *, tool: BaseTool, tool_args: dict[str, Any],
                                   tool_context: ToolContext) -> dict[str, Any] | None:
        if isinstance(tool, AgentTool) and not tool.include_plugins:
            return _refusal(f"sub-agent tool {tool.name!r} runs without hookgate "
                            "(AgentTool include_plugins=False); it was not started")
        confirmation = tool_context.tool_confirmation
        if confirmation is not None and not confirmation.confirmed:
            return _refusal("the call was rejected in the tool confirmation; it did not run")
        if confirmation is None and await tool.check_require_confirmation(tool_args,
                                                                          tool_context):
            # The tool's own confirmation (require_confirmation) asks first: the tool asks it
            # and does not run; once the user confirms, hookgate is asked (and may pause the
            # call again for a person), so both must approve.
            return None
        call_id = tool_context.function_call_id or f"adk-{uuid.uuid4().hex}"
        try:
            session = await self._session(tool_context)
            verdict = await self._guard.before_call(
                agent=self._agent_id(tool_context), session_id=session, call_id=call_id,
                tool=tool.name, arguments=tool_args, description=tool.description or None,
                parameters=_parameters(tool))
            if isinstance(verdict, Pending) and self._wait_s > 0:
                verdict = await self._guard.wait(verdict.call, timeout=self._wait_s)
        except GuardRefused as refused:
            return _refusal(f"hookgate refused the call: {refused}")
        return self._apply(verdict, tool, tool_args, tool_context, session, call_id)

    def _apply(self, verdict: Verdict, tool: BaseTool, tool_args: dict[str, Any],
               tool_context: ToolContext, session: str, call_id: str) -> dict[str, Any] | None:
        if isinstance(verdict, Denied):
            return _refusal(f"hookgate denied the call: {verdict.reason}")
        if isinstance(verdict, AlreadyRan):
            return {"result": verdict.observation}
        if isinstance(verdict, Pending):
            tool_context.request_confirmation(
                hint=(f"hookgate approval request {verdict.request_id}"
                      + (f": {verdict.reason}" if verdict.reason else "")),
                payload={"hookgate_request_id": verdict.request_id,
                         "hookgate_call": verdict.call})
            # The pause is not a result for the model to go on from: end the invocation here.
            tool_context.actions.skip_summarization = True
            return {"status": "pending",
                    "message": "waiting for a person to approve this call in hookgate "
                               f"(request {verdict.request_id})"}
        # Allowed: run exactly the arguments hookgate returned (rewritten or edited).
        if verdict.arguments != tool_args:
            tool_args.clear()
            tool_args.update(verdict.arguments)
        self._running[(tool_context.session.id, call_id)] = (verdict.call, verdict.note)
        if isinstance(tool, AgentTool):
            _delegating_session.set(session)
        return None

    async def after_tool_callback(self, *, tool: BaseTool, tool_args: dict[str, Any],
                                  tool_context: ToolContext,
                                  result: dict[str, Any]) -> dict[str, Any] | None:
        running = self._running.pop(
            (tool_context.session.id, tool_context.function_call_id or ""), None)
        if running is None:
            return None  # hookgate answered the call itself: nothing ran
        call, note = running
        observation = await self._guard.report(call, output=result)
        reply: dict[str, Any] = {"result": observation.text}
        if note:
            reply["note"] = note
        return reply

    async def on_tool_error_callback(self, *, tool: BaseTool, tool_args: dict[str, Any],
                                     tool_context: ToolContext,
                                     error: Exception) -> dict[str, Any] | None:
        running = self._running.pop(
            (tool_context.session.id, tool_context.function_call_id or ""), None)
        if running is None:
            return None
        observation = await self._guard.report(running[0], error=f"{type(error).__name__}: "
                                                                 f"{error}")
        return {"error": observation.text}

    async def on_event_callback(self, *, invocation_context: InvocationContext,
                                event: Event) -> Event | None:
        """A confirmed call that hookgate has not decided yet pauses again.

        ADK re-runs confirmed calls without turning a new confirmation request into a pause,
        so the "pending" responses of re-run calls are replaced by the confirmation requests
        hookgate asks for. In a batch where only some calls are still undecided, the decided
        ones' responses (a result or hookgate's refusal) are stored first as their own event,
        as ADK does when a first run pauses only some calls of a turn.
        """
        asked = event.actions.requested_tool_confirmations or {}
        responses = event.get_function_responses()
        if not responses or not any("hookgate_request_id" in (confirmation.payload or {})
                                    for confirmation in asked.values()):
            return None
        resumed = _resumed_calls(invocation_context)
        if not set(asked) <= set(resumed):
            return None  # a first pause: ADK turns it into a confirmation request itself
        settled = [r for r in responses if r.id not in asked]
        if settled:  # stored in the session (not yielded to the caller), before the pause
            role = event.content.role if event.content is not None else "user"
            await invocation_context.session_service.append_event(
                session=invocation_context.session,
                event=Event(invocation_id=event.invocation_id, author=event.author,
                            branch=event.branch, content=types.Content(
                                role=role, parts=[types.Part(function_response=r)
                                                  for r in settled])))
        asks = [types.FunctionCall(
            name=CONFIRMATION_CALL, id=f"adk-{uuid.uuid4()}", args={
                "originalFunctionCall": resumed[call_id].model_dump(exclude_none=True,
                                                                    by_alias=True),
                "toolConfirmation": confirmation.model_dump(by_alias=True, exclude_none=True)})
            for call_id, confirmation in asked.items()]
        return Event(invocation_id=event.invocation_id, author=event.author,
                     branch=event.branch,
                     content=types.Content(role="model", parts=[
                         types.Part(function_call=ask) for ask in asks]),
                     long_running_tool_ids={str(ask.id) for ask in asks})

    def _agent_id(self, context: CallbackContext) -> str:
        return self._agents.get(context.agent_name, self._agent)

    async def _session(self, context: CallbackContext) -> str:
        return (await self._start(context)).session_id

    async def _start(self, context: CallbackContext) -> SessionStarted:
        """hookgate's session for this ADK session and agent, started on first use."""
        adk_session = context.session.id
        session = f"{adk_session}:{context.agent_name}"
        started = self._started.get(session)
        if started is None:
            parent = _delegating_session.get()
            if parent is None:
                agent = getattr(getattr(context, "_invocation_context", None), "agent", None)
                parent_agent = getattr(agent, "parent_agent", None)
                if parent_agent is not None:
                    parent = f"{adk_session}:{parent_agent.name}"
            started = await self._guard.start_session(
                agent=self._agents.get(context.agent_name, self._agent), session_id=session,
                parent_session=parent)
            self._started[session] = started
        return started


def _resumed_calls(context: InvocationContext) -> dict[str, types.FunctionCall]:
    """The original function calls (by id) whose confirmations the user's latest message
    answers (ADK re-runs them)."""
    latest = next((e for e in reversed(context.session.events) if e.author == "user"), None)
    replies = {r.id for r in latest.get_function_responses()
               if r.name == CONFIRMATION_CALL} if latest is not None else set()
    found: dict[str, types.FunctionCall] = {}
    for event in context.session.events:
        for call in event.get_function_calls():
            original = (call.args or {}).get("originalFunctionCall")
            if call.name == CONFIRMATION_CALL and call.id in replies and \
                    isinstance(original, dict) and original.get("id"):
                found[str(original["id"])] = types.FunctionCall(**original)
    return found


def _parameters(tool: BaseTool) -> dict[str, Any] | None:
    """The tool's JSON schema, which lets an approver edit the arguments (None: no edits)."""
    try:
        declaration = tool._get_declaration()  # what ADK itself shows the model
    except Exception:  # without a schema a person can still approve or reject
        return None
    schema = getattr(declaration, "parameters_json_schema", None)
    return dict(schema) if isinstance(schema, dict) else None


def _refusal(reason: str) -> dict[str, Any]:
    return {"error": reason}


def pending_calls(events: Iterable[Event]) -> list[PendingCall]:
    """The calls an invocation paused on, read from the events it yielded."""
    found: list[PendingCall] = []
    for event in events:
        for call in event.get_function_calls():
            if call.name != CONFIRMATION_CALL or not call.id or not call.args:
                continue
            original = call.args.get("originalFunctionCall") or {}
            payload = (call.args.get("toolConfirmation") or {}).get("payload") or {}
            if "hookgate_request_id" not in payload:
                continue  # a confirmation some other tool asked for
            hint = (call.args.get("toolConfirmation") or {}).get("hint") or ""
            found.append(PendingCall(
                confirmation_call_id=call.id, tool=str(original.get("name", "")),
                arguments=dict(original.get("args") or {}),
                request_id=str(payload["hookgate_request_id"]),
                reason=hint.partition(": ")[2] or None))
    return found


def confirmation_replies(pending: Iterable[PendingCall]) -> types.Content:
    """The user message that resumes paused calls; hookgate's decision is asked again.

    Send it with `runner.run_async(..., new_message=...)` once the requests are decided: an
    approved call runs with the arguments hookgate returns, a rejected one does not run, and
    one still undecided pauses again.
    """
    return types.Content(role="user", parts=[
        types.Part(function_response=types.FunctionResponse(
            name=CONFIRMATION_CALL, id=p.confirmation_call_id, response={"confirmed": True}))
        for p in pending])
