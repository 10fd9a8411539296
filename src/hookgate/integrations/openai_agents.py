"""The OpenAI Agents SDK's tool calls through hookgate: each function tool (agents used as tools
included) asks the guard in ``needs_approval`` and an input guardrail, runs with the arguments
hookgate allows and answers the model with hookgate's observation; a call a person must decide is
an interruption of the run, and :meth:`HookgateGate.apply_decisions` applies hookgate's decisions
to the `RunState` to resume with. Handoffs go through the gate too."""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from agents import (
    Agent,
    FunctionTool,
    Handoff,
    RunContextWrapper,
    RunResult,
    RunState,
    ToolApprovalItem,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
    handoff,
)
from agents.agent_tool_state import get_agent_tool_state_scope, peek_agent_tool_run_result
from agents.exceptions import AgentsException
from agents.tool_context import ToolContext

from hookgate.client import (
    Allowed,
    AlreadyRan,
    AsyncGuard,
    Decided,
    Denied,
    GuardRefused,
    GuardUnavailable,
    Observation,
    Pending,
    Verdict,
)

__all__ = ["HandoffBlocked", "HookgateGate", "HookgateRefused", "HookgateUnavailable",
           "HookgateUndecided", "PendingCall"]

_log = logging.getLogger(__name__)


class HookgateUnavailable(AgentsException, GuardUnavailable):
    """hookgate could not be reached or failed: the call did not run (the SDK passes its own
    exceptions through unwrapped, so the run ends with this one and its reason)."""


class HookgateRefused(AgentsException, GuardRefused):
    """hookgate refused the request (a re-used call id, an unknown agent, no access): the
    call did not run; the message says why."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class HookgateUndecided(AgentsException):
    """A resumed run reached a call hookgate has not decided yet (the SDK's approval alone,
    or hookgate first asked when the call was about to run): the call did not run and the run
    stops, so nothing is lost. Decide ``request_id``, call `HookgateGate.apply_decisions` on
    the stored `RunState` and resume it when that returns no pending calls."""

    def __init__(self, tool: str, call: str, request_id: str) -> None:
        super().__init__(
            f"hookgate has not decided the call of {tool!r} yet (request {request_id}); it "
            "did not run. Call apply_decisions on the stored RunState and resume it once "
            "apply_decisions returns no pending calls")
        self.tool = tool
        self.call = call
        self.request_id = request_id


class HandoffBlocked(AgentsException):
    """hookgate did not allow a handoff (denied, or no decision yet): the run stops before the
    next agent takes over; the message says why."""


@dataclass(frozen=True)
class PendingCall:
    """An interruption of the run that waits for a hookgate decision."""

    item: ToolApprovalItem
    call: str            # hookgate's id of the call
    request_id: str      # the approval request a person decides (inbox, CLI, chat)
    reason: str | None


@dataclass
class _Shared:
    """What the gates of one agent tree learnt from hookgate, in this process."""

    # Verdicts taken from hookgate and not yet acted on, by (hookgate agent, session, the
    # SDK's call id): needs_approval, the input guardrail and the invocation of one call ask
    # once between them, and hookgate says "allowed" for a call only once.
    decided: dict[tuple[str, str, str], Verdict] = field(default_factory=dict)
    # Which gate guards the tools of each SDK agent (by name), to ask again after a restart.
    gates: dict[str, HookgateGate] = field(default_factory=dict)
    started: set[tuple[str, str]] = field(default_factory=set)
    # Calls apply_decisions approved for the run without hookgate's verdict: they were
    # interrupted to be decided, so they never run unguarded (fail_open does not apply).
    interrupted: set[tuple[str, str, str]] = field(default_factory=set)


@dataclass
class HookgateGate:
    """Routes an Agents SDK agent's tool calls through ``guard`` as hookgate agent ``agent`` in
    session ``session_id`` (keep it across a process restart to resume a stored `RunState`).

    If hookgate cannot be reached the call does not run and the run fails with
    `HookgateUnavailable` (a `GuardUnavailable`), unless ``fail_open=True`` (the call then
    runs unguarded, logged).
    """

    guard: AsyncGuard
    agent: str
    session_id: str
    parent_session: str | None = None
    fail_open: bool = False
    _shared: _Shared = field(default_factory=_Shared, repr=False)
    #: The tools as the application declared them (their own ``needs_approval``), by name.
    _originals: dict[str, FunctionTool] = field(default_factory=dict, repr=False)

    def guard_agent(self, agent: Agent[Any]) -> Agent[Any]:
        """A copy of ``agent`` whose function tools (agents used as tools included) and
        handoffs go through this gate. Sub-agents behind tools and handoffs need their own
        gate (:meth:`sub_gate`) before they are turned into tools or handoffs."""
        self._shared.gates[agent.name] = self
        tools = [self.guard_tool(tool) if isinstance(tool, FunctionTool) else tool
                 for tool in agent.tools]
        handoffs: list[Agent[Any] | Handoff[Any, Any]] = [
            self.guard_handoff(h if isinstance(h, Handoff) else handoff(h))
            for h in agent.handoffs]
        return agent.clone(tools=tools, handoffs=handoffs)

    def sub_gate(self, *, agent: str, session_id: str) -> HookgateGate:
        """The gate of a sub-agent (an agent used as a tool, or a handoff's target): the same
        guard, another hookgate agent, a session linked to this one."""
        return HookgateGate(self.guard, agent, session_id, parent_session=self.session_id,
                            fail_open=self.fail_open, _shared=self._shared)

    def guard_tool(self, tool: FunctionTool) -> FunctionTool:
        """``tool`` asking hookgate before it runs and reporting to it after."""

        self._originals[tool.name] = tool

        async def needs_approval(ctx: RunContextWrapper[Any], arguments: dict[str, Any],
                                 call_id: str) -> bool:
            if await _own_approval(tool, ctx, arguments, call_id):
                # The SDK's own approval comes first; hookgate is asked once it is given
                # (asked now, an allowed call would count as started before anyone approved).
                return True
            verdict = await self._ask(call_id, tool.name, arguments, *_declared(tool))
            return isinstance(verdict, Pending)

        async def check(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
            ctx = data.context
            verdict = await self._ask(ctx.tool_call_id, tool.name, _arguments(ctx),
                                      *_declared(tool))
            if isinstance(verdict, Denied):
                self._shared.decided.pop(self._key(ctx.tool_call_id), None)
                return ToolGuardrailFunctionOutput.reject_content(verdict.reason)
            if isinstance(verdict, Pending):
                # The SDK approved a call hookgate has not decided (resumed without
                # apply_decisions, or hookgate asked only now): the SDK cannot pause a run
                # from here, so the run stops and the stored state stays resumable.
                raise HookgateUndecided(tool.name, verdict.call, verdict.request_id)
            return ToolGuardrailFunctionOutput.allow()

        async def invoke(ctx: ToolContext[Any], arguments_json: str) -> Any:
            verdict = self._shared.decided.pop(self._key(ctx.tool_call_id), None) or \
                await self._ask(ctx.tool_call_id, tool.name, _arguments(ctx),
                                *_declared(tool), keep=False)
            if verdict is None:  # hookgate unreachable and this gate fails open
                return await tool.on_invoke_tool(ctx, arguments_json)
            if isinstance(verdict, AlreadyRan):
                if not _sub_agent_paused(tool, ctx):
                    return verdict.observation
                # The SDK resumes a sub-agent that paused inside this call: the call started
                # once, and each of the sub-agent's own calls is guarded on its own.
                verdict = Allowed(verdict.call, _arguments(ctx), None)
            if isinstance(verdict, Denied):
                return verdict.reason
            if isinstance(verdict, Pending):
                raise HookgateUndecided(tool.name, verdict.call, verdict.request_id)
            return await self._run(tool, ctx, arguments_json, verdict)

        guardrail: ToolInputGuardrail[Any] = ToolInputGuardrail(
            guardrail_function=check, name="hookgate")
        return dataclasses.replace(
            tool, on_invoke_tool=invoke, needs_approval=needs_approval,
            tool_input_guardrails=[*(tool.tool_input_guardrails or []), guardrail])

    def guard_handoff(self, handoff: Handoff[Any, Any]) -> Handoff[Any, Any]:
        """``handoff`` taking place only when hookgate allows it (a handoff cannot wait in
        the SDK: denied or undecided, the run stops with `HandoffBlocked`)."""

        async def invoke(ctx: RunContextWrapper[Any], input_json: str) -> Any:
            # The SDK hands a handoff no call id: each handoff is a call of its own.
            call_id = f"handoff-{uuid4().hex}"
            arguments = _parse(input_json)
            verdict = await self._ask(call_id, handoff.tool_name, arguments,
                                      handoff.tool_description, handoff.input_json_schema,
                                      keep=False)
            if verdict is None:  # hookgate unreachable and this gate fails open
                return await handoff.on_invoke_handoff(ctx, input_json)
            if isinstance(verdict, Denied):
                raise HandoffBlocked(f"hookgate denied handoff {handoff.tool_name!r}: "
                                     f"{verdict.reason}")
            if isinstance(verdict, Pending):
                raise HandoffBlocked(f"handoff {handoff.tool_name!r} waits for a decision "
                                     f"(request {verdict.request_id}); it did not take place")
            target = await handoff.on_invoke_handoff(ctx, input_json)
            if isinstance(verdict, Allowed):
                await self._report(verdict.call, output={"agent": handoff.agent_name})
            return target

        return dataclasses.replace(handoff, on_invoke_handoff=invoke)

    def pending(self, result: RunResult | RunState[Any, Any]) -> list[PendingCall]:
        """The run's interruptions that wait for hookgate, with their approval requests (known
        in the process that asked hookgate about them)."""
        items = result.interruptions if isinstance(result, RunResult) else \
            result.get_interruptions()
        found = []
        for item in items:
            gate = self._shared.gates.get(item.agent.name)
            verdict = gate._shared.decided.get(gate._key(item.call_id or "")) if gate else None
            if isinstance(verdict, Pending):
                found.append(PendingCall(item, verdict.call, verdict.request_id, verdict.reason))
        return found

    async def apply_decisions(self, state: RunState[Any, Any], *,
                              wait: float = 0) -> list[PendingCall]:
        """Apply hookgate's decisions on the run's interruptions to ``state``: an approval
        approves the call (it then runs with the arguments hookgate allows, edited ones
        included, and the model is told), a rejection rejects it with hookgate's reason as the
        message the model sees. Waits up to ``wait`` seconds for each undecided call; returns
        the calls still undecided (resume only when it is empty, or they interrupt again).

        It starts no call: a call starts when the resumed run asks hookgate right before the
        tool runs. A call hookgate was not asked about in this process (a tool's own
        ``needs_approval`` the SDK's user approved, or a state another process stored) is
        approved for the run, which asks hookgate then; if hookgate has not decided it, the
        run stops with `HookgateUndecided` before the tool runs, and from then on this
        returns it as still waiting (decide it, call this again, then resume)."""
        # The RunState's context (its approvals, and the context the tool's own
        # needs_approval is evaluated with): openai-agents 0.24 has no public accessor on
        # RunState (only approve/reject), so its private ``_context`` is read here.
        context = state._context
        still: list[PendingCall] = []
        for item in state.get_interruptions():
            call_id = item.call_id
            gate = self._shared.gates.get(item.agent.name)
            if call_id is None or gate is None:
                continue  # not an interruption of a hookgate-guarded tool
            key = gate._key(call_id)
            arguments = _parse(item.arguments)
            original = gate._originals.get(item.name or "")
            held = self._shared.decided.get(key)
            # The tool's own approval asks too: hookgate is asked only once the SDK's user
            # approved; a user's rejection stands (nothing is asked).
            if original is not None and context is not None and await _own_approval(
                    original, context, arguments, call_id) and context.get_approval_status(
                        item.name or "", call_id, existing_pending=item) is not True:
                continue
            if held is None:
                # hookgate was not asked about this call in this process (a tool's own
                # approval, or a state stored by another process): its id of the call is not
                # in the RunState, and asking for it now would start an allowed (or already
                # approved) call here, lost if this process exits before the run. The run
                # asks right before the tool runs, and the call starts then: allowed it runs,
                # denied the model reads why, undecided the run stops (HookgateUndecided).
                self._shared.interrupted.add(key)
                state.approve(item)
                continue
            verdict = held
            if isinstance(verdict, Pending):
                try:
                    # Learning the decision starts nothing: the resumed run asks again, and
                    # only then does the call start (once, whichever process resumes it).
                    decision = await self.guard.decision(verdict.call, timeout=wait)
                except GuardUnavailable as error:
                    raise HookgateUnavailable(str(error)) from error
                if isinstance(decision, Pending):
                    still.append(PendingCall(item, decision.call, decision.request_id,
                                             decision.reason))
                    continue
                self._shared.decided.pop(key, None)
                if isinstance(decision, Decided) and not decision.approved:
                    verdict = await self._rejection(decision)
            if isinstance(verdict, Denied):
                state.reject(item, rejection_message=verdict.reason)
            else:
                state.approve(item)
        return still

    async def _rejection(self, decision: Decided) -> Denied:
        """What hookgate tells the model of a rejection (who rejected it, the request, the
        reason): the rejected call's own verdict, which starts nothing."""
        try:
            told = await self.guard.wait(decision.call, timeout=0)
        except GuardUnavailable as error:
            raise HookgateUnavailable(str(error)) from error
        if isinstance(told, Denied):
            return told
        return Denied(decision.call, decision.reason or "rejected in hookgate")

    def _key(self, call_id: str) -> tuple[str, str, str]:
        return (self.agent, self.session_id, call_id)

    async def _ask(self, call_id: str, tool: str, arguments: dict[str, Any],
                   description: str | None, parameters: dict[str, Any] | None, *,
                   keep: bool = True) -> Verdict | None:
        """hookgate's verdict on this call (the one already taken in this process, if any);
        None when hookgate is unreachable and this gate fails open."""
        held = self._shared.decided.get(self._key(call_id))
        if held is not None:
            return held
        try:
            key = (self.agent, self.session_id)
            if key not in self._shared.started:
                started = await self.guard.start_session(
                    agent=self.agent, session_id=self.session_id,
                    parent_session=self.parent_session)
                if started.stopped:
                    raise GuardRefused(started.stopped)
                self._shared.started.add(key)
            verdict = await self.guard.before_call(
                agent=self.agent, session_id=self.session_id, call_id=call_id, tool=tool,
                arguments=arguments, description=description, parameters=parameters)
        except GuardUnavailable as error:
            if self.fail_open and self._key(call_id) not in self._shared.interrupted:
                _log.warning("hookgate unreachable; %r runs unguarded (fail_open=True): %s",
                             tool, error)
                return None
            raise HookgateUnavailable(str(error)) from error
        except GuardRefused as error:
            raise HookgateRefused(str(error), error.status) from error
        if keep:
            self._shared.decided[self._key(call_id)] = verdict
        return verdict

    async def _report(self, call: str, **result: Any) -> Observation:
        # The tool ran: without hookgate's observation the model is shown nothing of it.
        try:
            return await self.guard.report(call, **result)
        except GuardUnavailable as error:
            raise HookgateUnavailable(str(error)) from error
        except GuardRefused as error:
            raise HookgateRefused(str(error), error.status) from error

    async def _run(self, tool: FunctionTool, ctx: ToolContext[Any], arguments_json: str,
                   allowed: Allowed) -> Any:
        if allowed.arguments != _parse(arguments_json):
            arguments_json = json.dumps(allowed.arguments)
        try:
            output = await tool.on_invoke_tool(ctx, arguments_json)
        except Exception as error:
            await self._report(allowed.call, error=f"{type(error).__name__}: {error}")
            raise
        if _sub_agent_paused(tool, ctx):
            return output  # reported when the sub-agent finishes
        observation = await self._report(allowed.call, output=_jsonable(output))
        if allowed.note:
            return f"{allowed.note}\n\n{observation.text}"
        return observation.text


async def _own_approval(tool: FunctionTool, ctx: RunContextWrapper[Any],
                        arguments: dict[str, Any], call_id: str) -> bool:
    """Whether the tool's own ``needs_approval`` (as the application declared it) asks the
    SDK's user about this call."""
    own = tool.needs_approval
    if isinstance(own, bool):
        return own
    answer: Any = own(ctx, arguments, call_id)
    return bool(await answer if inspect.isawaitable(answer) else answer)


def _sub_agent_paused(tool: FunctionTool, ctx: ToolContext[Any]) -> bool:
    """Whether ``tool`` is an agent used as a tool whose run paused in this call (its
    interruptions wait in the outer run)."""
    if not tool._is_agent_tool or ctx.tool_call is None:
        return False
    paused = peek_agent_tool_run_result(ctx.tool_call, scope_id=get_agent_tool_state_scope(ctx))
    return bool(getattr(paused, "interruptions", None))


def _declared(tool: FunctionTool) -> tuple[str | None, dict[str, Any]]:
    """What hookgate is told of a tool: its description and its JSON schema (an approver's
    edit is checked against it)."""
    return tool.description, tool.params_json_schema


def _arguments(ctx: ToolContext[Any]) -> dict[str, Any]:
    return _parse(ctx.tool_arguments)


def _parse(arguments_json: str | None) -> dict[str, Any]:
    parsed = json.loads(arguments_json) if arguments_json else {}
    if not isinstance(parsed, dict):
        raise HookgateRefused(f"tool arguments are not a JSON object: {arguments_json!r}")
    return parsed


def _jsonable(output: Any) -> Any:
    if isinstance(output, str | int | float | bool | type(None) | list | dict):
        return output
    return str(output)

