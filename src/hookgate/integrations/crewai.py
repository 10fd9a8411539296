"""CrewAI adapter: every tool call of a crew, delegation included, goes through hookgate.

`HookgateToolHooks` holds CrewAI's before/after tool-call hooks (`with hooks.installed():
crew.kickoff()`): the before hook asks hookgate (`before_call`) and runs the call only when
hookgate allows it, with the arguments hookgate returns; the after hook reports the output
(`report`) and hands the model only hookgate's observation. CrewAI swallows a hook's
exceptions (its hooks fail open), so every failure here blocks the call instead.
"""

from __future__ import annotations

import contextvars
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from crewai.hooks import (
    HookAborted,
    LLMCallHookContext,
    ToolCallHookContext,
    register_after_tool_call_hook,
    register_before_llm_call_hook,
    register_before_tool_call_hook,
    unregister_after_tool_call_hook,
    unregister_before_llm_call_hook,
    unregister_before_tool_call_hook,
)

from hookgate.client import (
    AlreadyRan,
    Denied,
    Guard,
    Observation,
    Pending,
    SessionStarted,
    Verdict,
)

__all__ = ["HookgateToolHooks"]

# CrewAI's delegation tools ("Delegate work to coworker", "Ask question to coworker") as
# the hooks name them: the coworker's own calls run inside them.
DELEGATION_TOOLS = frozenset({"delegate_work_to_coworker", "ask_question_to_coworker"})

# How CrewAI words the result of a call a before hook blocked.
CREWAI_BLOCKED = "Tool execution blocked by hook."

# The hookgate session whose delegation tool is running a coworker right now.
_delegating_session: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "hookgate_crewai_delegating_session", default=None
)


@dataclass
class _CallInFlight:
    """What the before hook decided, for the after hook of the same call."""

    call: str | None          # hookgate's call id when the tool runs
    refusal: str | None       # what the model is told instead when it does not
    note: str | None = None
    delegation: contextvars.Token[str | None] | None = None


class HookgateToolHooks:
    """CrewAI tool-call hooks that ask hookgate about every call.

    `agent` is the hookgate agent id; `agents` maps a CrewAI agent's role to another
    hookgate agent id. A call a person must decide is long-polled for up to `wait_s`
    seconds; still undecided then, it does not run and the model is told the request id.
    """

    def __init__(self, guard: Guard, *, agent: str, agents: Mapping[str, str] | None = None,
                 wait_s: float = 0.0) -> None:
        self._guard = guard
        self._agent = agent
        self._agents = dict(agents or {})
        self._wait_s = wait_s
        self._started: dict[str, SessionStarted] = {}  # what SessionStart hooks said
        self._lock = threading.Lock()
        # id(tool_input) -> (tool_input, decision): CrewAI hands the before and the after
        # hook of one call the same argument dict, and nothing else that ties them together.
        self._in_flight: dict[int, tuple[dict[str, Any], _CallInFlight]] = {}

    def install(self) -> None:
        """Register the hooks globally; install them after any hook that edits arguments."""
        register_before_llm_call_hook(self.before_llm_call)
        register_before_tool_call_hook(self.before_tool_call)
        register_after_tool_call_hook(self.after_tool_call)

    def uninstall(self) -> None:
        unregister_before_llm_call_hook(self.before_llm_call)
        unregister_before_tool_call_hook(self.before_tool_call)
        unregister_after_tool_call_hook(self.after_tool_call)

    @contextmanager
    def installed(self) -> Iterator[HookgateToolHooks]:
        self.install()
        try:
            yield self
        finally:
            self.uninstall()

    def before_llm_call(self, context: LLMCallHookContext) -> None:
        """Start the task's session (SessionStart hooks) and show the model what they add."""
        if context.task is None and context.crew is None:
            return  # not a crew's model call
        key = self._session_key(context.task, context.crew)
        with self._lock:
            if key in self._started:
                return
        try:
            started = self._start(key, self._agent_id(context.agent))
        except Exception:  # its tool calls ask again, and fail closed
            return
        if started.context:
            # In place, once: CrewAI keeps this list for the task's later model calls.
            context.messages.insert(0, {"role": "system", "content": started.context})

    def before_tool_call(self, context: ToolCallHookContext) -> bool | None:
        """Ask hookgate; anything but an allow blocks the call (HookAborted)."""
        try:
            decision = self._decide(context)
        except Exception as error:  # CrewAI would swallow it and run the tool: block instead
            decision = _CallInFlight(
                call=None, refusal=f"hookgate could not check the call, so it did not run: "
                                   f"{type(error).__name__}: {error}")
        with self._lock:
            self._in_flight[id(context.tool_input)] = (context.tool_input, decision)
        if decision.refusal is not None:
            raise HookAborted(reason=decision.refusal, source="hookgate")
        return None

    def after_tool_call(self, context: ToolCallHookContext) -> str | None:
        """Replace the tool's output with what hookgate lets the model see."""
        with self._lock:
            _, decision = self._in_flight.pop(id(context.tool_input), (None, None))
        if decision is None:
            return None  # not a call these hooks decided (installed mid-call)
        if decision.delegation is not None:
            with suppress(ValueError):  # set in another context: nothing of ours to undo
                _delegating_session.reset(decision.delegation)
        if decision.call is None:
            return decision.refusal
        try:
            observation = self._report(decision.call, context)
        except Exception as error:  # CrewAI would hand the model the raw output
            return (f"the tool ran, but hookgate could not review its output, so it is "
                    f"withheld: {type(error).__name__}: {error}")
        if decision.note:
            return f"{observation.text}\n(hookgate: {decision.note})"
        return observation.text

    def _report(self, call: str, context: ToolCallHookContext) -> Observation:
        output = context.raw_tool_result if context.raw_tool_result is not None \
            else context.tool_result
        if isinstance(output, str) and output.startswith(CREWAI_BLOCKED):
            # A CrewAI hook after hookgate's blocked the call: the tool did not run.
            return self._guard.report(call, error=output)
        return self._guard.report(call, output=output)

    def _decide(self, context: ToolCallHookContext) -> _CallInFlight:
        agent = self._agent_id(context.agent)
        session = self._start(self._session_key(context.task, context.crew), agent).session_id
        verdict = self._guard.before_call(
            agent=agent, session_id=session, call_id=f"crewai-{uuid.uuid4().hex}",
            tool=context.tool_name, arguments=context.tool_input,
            description=getattr(context.tool, "description", None),
            parameters=_parameters(context))
        verdict = self._wait(verdict)
        if isinstance(verdict, Denied):
            return _CallInFlight(call=None, refusal=f"hookgate denied the call: {verdict.reason}")
        if isinstance(verdict, AlreadyRan):
            return _CallInFlight(call=None, refusal=verdict.observation)
        if isinstance(verdict, Pending):
            return _CallInFlight(call=None, refusal=(
                f"the call did not run: it waits for approval in hookgate (request "
                f"{verdict.request_id})" + (f": {verdict.reason}" if verdict.reason else "")))
        if verdict.arguments != context.tool_input:
            # In place: CrewAI runs the dict it handed the hook, not a replacement.
            context.tool_input.clear()
            context.tool_input.update(verdict.arguments)
        token = _delegating_session.set(session) if context.tool_name in DELEGATION_TOOLS \
            else None
        return _CallInFlight(call=verdict.call, refusal=None, note=verdict.note,
                             delegation=token)

    def _wait(self, verdict: Verdict) -> Verdict:
        """Long-poll a pending call until it is decided or `wait_s` has passed."""
        deadline = time.monotonic() + self._wait_s
        while isinstance(verdict, Pending) and (left := deadline - time.monotonic()) > 0:
            verdict = self._guard.wait(verdict.call, timeout=left)
        return verdict

    def _agent_id(self, crew_agent: Any) -> str:
        role = getattr(crew_agent, "role", None)
        return self._agents.get(role, self._agent) if role else self._agent

    @staticmethod
    def _session_key(task: Any, crew: Any) -> str:
        """hookgate's session: one per CrewAI task (a delegation is a task of its own)."""
        key = task.id if task is not None else crew.id if crew is not None else "crewai"
        return f"crewai-{key}"

    def _start(self, session: str, agent: str) -> SessionStarted:
        with self._lock:
            started = self._started.get(session)
        if started is None:
            started = self._guard.start_session(agent=agent, session_id=session,
                                                parent_session=_delegating_session.get())
            with self._lock:
                self._started[session] = started
        return started


def _parameters(context: ToolCallHookContext) -> dict[str, Any] | None:
    """The tool's JSON schema, which lets an approver edit the arguments (None: no edits)."""
    schema = getattr(context.tool, "args_schema", None)
    try:
        return dict(schema.model_json_schema()) if schema is not None else None
    except Exception:  # without a schema a person can still approve or reject
        return None
