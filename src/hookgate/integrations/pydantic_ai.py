"""Pydantic AI's tool calls through hookgate: a wrapper toolset asks the guard before each call
and reports after it; a call a person must decide ends the run as a deferred tool request, and
hookgate's decisions come back as `DeferredToolResults`."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ApprovalRequired, ModelRetry
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.tools import (
    AgentDepsT,
    DeferredToolRequests,
    DeferredToolResults,
    ToolApproved,
    ToolDenied,
)
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import to_jsonable_python

from hookgate.client import (
    Allowed,
    AlreadyRan,
    AsyncGuard,
    Decided,
    Denied,
    GuardRefused,
    GuardUnavailable,
    Pending,
    Verdict,
)

__all__ = ["HOOKGATE_CALL", "HookgateToolset"]

HOOKGATE_CALL = "hookgate_call"
"""Key of hookgate's call id in a deferred request's metadata (with ``hookgate_request``, the
approval request a person decides, and ``hookgate_reason``)."""

_log = logging.getLogger(__name__)


@dataclass
class _GateState:
    """The session as hookgate started it, shared by the toolset's per-run copies."""

    context: str | None = None
    started: bool = False


@dataclass
class HookgateToolset(WrapperToolset[AgentDepsT]):
    """Wraps a toolset so every call goes through ``guard`` as hookgate agent ``agent``.

    A call hookgate allows runs with the arguments hookgate returns (possibly rewritten or
    edited by the approver; the model is told) and the model sees hookgate's observation of its
    output; a denied call answers the model with the reason; a pending one becomes a deferred
    approval request (use the agent's ``output_type=[..., DeferredToolRequests]``). Resume with
    :meth:`results`. If hookgate cannot be reached the call does not run and the run fails with
    `GuardUnavailable`, unless ``fail_open=True`` (the call then runs unguarded, logged).
    """

    guard: AsyncGuard = field(kw_only=True)
    agent: str = field(kw_only=True)
    session_id: str = field(kw_only=True)
    parent_session: str | None = field(default=None, kw_only=True)
    fail_open: bool = field(default=False, kw_only=True)
    _state: _GateState = field(default_factory=lambda: _GateState(), kw_only=True, repr=False)

    def delegate(self, wrapped: AbstractToolset[Any], *, agent: str,
                 session_id: str) -> HookgateToolset[Any]:
        """The toolset for a sub-agent this agent calls from a tool: its calls go through the
        same guard as ``agent``, in a session linked to this one."""
        return HookgateToolset(wrapped, guard=self.guard, agent=agent, session_id=session_id,
                               parent_session=self.session_id, fail_open=self.fail_open)

    async def get_instructions(self, ctx: RunContext[AgentDepsT]) -> Any:
        """The context SessionStart hooks add for the model, with the wrapped toolset's own."""
        own = await super().get_instructions(ctx)
        try:
            await self._start()
        except GuardUnavailable:
            if not self.fail_open:
                raise
            _log.warning("hookgate unreachable; session %r starts unguarded (fail_open=True)",
                         self.session_id)
        if self._state.context is None:
            return own
        if own is None:
            return self._state.context
        return [self._state.context, *(own if isinstance(own, list) else [own])]

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT],
                        tool: ToolsetTool[AgentDepsT]) -> Any:
        call_id = ctx.tool_call_id
        if call_id is None:
            raise GuardRefused(f"tool {name!r}: Pydantic AI gave no tool call id, so hookgate "
                               "cannot bind a decision to this call; it does not run")
        try:
            verdict = await self._verdict(name, tool_args, ctx, tool, call_id)
        except GuardUnavailable:
            if not self.fail_open:
                raise
            _log.warning("hookgate unreachable; tool %r runs unguarded (fail_open=True)", name)
            return await super().call_tool(name, tool_args, ctx, tool)
        if isinstance(verdict, Pending):
            # Undecided, the call pauses (again) on hookgate's request, also when it was
            # approved elsewhere (a result hookgate did not give): it does not run, and it is
            # not lost to the model as a refusal.
            raise ApprovalRequired(metadata={HOOKGATE_CALL: verdict.call,
                                             "hookgate_request": verdict.request_id,
                                             "hookgate_reason": verdict.reason})
        if isinstance(verdict, Denied):
            return ToolDenied(verdict.reason)
        if isinstance(verdict, AlreadyRan):
            return verdict.observation
        return await self._run(name, tool_args, ctx, tool, verdict)

    async def results(self, requests: DeferredToolRequests, *,
                      wait: float = 0) -> DeferredToolResults:
        """hookgate's decisions on the deferred requests this toolset made, as the
        `DeferredToolResults` to resume with: an approval is `ToolApproved` (with the
        approver's edit as ``override_args``; the call then runs with the arguments hookgate
        allows when asked again, and the model is told), a rejection `ToolDenied` with
        hookgate's reason. Waits up to ``wait``
        seconds for each undecided call and leaves out those still undecided
        (``requests.remaining(results)`` lists them)."""
        results = DeferredToolResults()
        for part in requests.approvals:
            held = requests.metadata.get(part.tool_call_id) or {}
            call = held.get(HOOKGATE_CALL)
            if not isinstance(call, str):
                continue  # deferred by something other than hookgate
            # Learning the decision starts nothing: the resumed run asks again (and runs
            # hookgate's arguments, an approver's edit included), and only then does the call
            # start, once, whichever process resumes it.
            decision = await self.guard.decision(call, timeout=wait)
            if isinstance(decision, Pending):
                continue
            results.metadata[part.tool_call_id] = dict(held)
            if isinstance(decision, Decided) and not decision.approved:
                results.approvals[part.tool_call_id] = ToolDenied(
                    await self._rejection(decision))
            elif (isinstance(decision, Decided) and decision.arguments is not None
                  and decision.arguments != part.args_as_dict()):
                # The approver's edit, as Pydantic AI says it; the resumed call still asks
                # hookgate (with the model's own arguments) and runs what hookgate allows.
                results.approvals[part.tool_call_id] = ToolApproved(
                    override_args=decision.arguments)
            else:
                results.approvals[part.tool_call_id] = ToolApproved()
        return results

    async def _rejection(self, decision: Decided) -> str:
        """What hookgate tells the model of a rejection (who rejected it, the request, the
        reason): the rejected call's own verdict, which starts nothing."""
        told = await self.guard.wait(decision.call, timeout=0)
        if isinstance(told, Denied):
            return told.reason
        return decision.reason or "rejected in hookgate"

    async def _start(self) -> None:
        if not self._state.started:
            started = await self.guard.start_session(agent=self.agent, session_id=self.session_id,
                                                     parent_session=self.parent_session)
            if started.stopped:
                raise GuardRefused(started.stopped)
            self._state.context, self._state.started = started.context, True

    async def _verdict(self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT],
                       tool: ToolsetTool[AgentDepsT], call_id: str) -> Verdict:
        # A resumed call is asked again exactly as the model made it (not with the
        # `override_args` of the results, which hookgate would take for another call): hookgate
        # answers with its decision, and starts the call only now.
        await self._start()
        return await self.guard.before_call(
            agent=self.agent, session_id=self.session_id, call_id=call_id, tool=name,
            arguments=_as_asked(ctx, call_id, tool_args), description=tool.tool_def.description,
            parameters=tool.tool_def.parameters_json_schema)

    async def _run(self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT],
                   tool: ToolsetTool[AgentDepsT], allowed: Allowed) -> Any:
        arguments = tool_args
        if allowed.arguments != tool_args:
            # Rewritten or edited arguments meet the tool's own schema, as the model's did.
            arguments = tool.args_validator.validate_python(allowed.arguments)
        try:
            output = await super().call_tool(name, arguments, ctx, tool)
        except ModelRetry as retry:
            # Pydantic AI shows a retry's message to the model: it gets hookgate's observation
            # of the failure (rewritten or withheld by the PostToolUse hooks), not the raw words.
            seen = await self.guard.report(allowed.call, error=retry.message)
            raise ModelRetry(seen.text) from None
        except Exception as error:
            await self.guard.report(allowed.call, error=f"{type(error).__name__}: {error}")
            raise
        observation = await self.guard.report(allowed.call, output=to_jsonable_python(output))
        if allowed.note:
            return f"{allowed.note}\n\n{observation.text}"
        return observation.text


def _as_asked(ctx: RunContext[Any], call_id: str, tool_args: dict[str, Any]) -> dict[str, Any]:
    """The arguments of call ``call_id`` as the model made it, from the run's messages."""
    for message in reversed(ctx.messages):
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart) and part.tool_call_id == call_id:
                    return part.args_as_dict()
    return tool_args
