"""One Claude Code hook call, answered in Claude Code's hook JSON.

PreToolUse and PermissionRequest take the first half of the guarded path (the agent's
PreToolUse hooks, read-only, rate limits, the gate); PostToolUse and PostToolUseFailure the
PostToolUse chain (audit, result rules); SessionStart the SessionStart chain. The session
is the run (one per agent, user and ``session_id``), ``tool_use_id`` the call id.
UserPromptSubmit and Stop have no hookgate equivalent and are answered with "no objection".

A SessionStart chain that stops the session is recorded in the execution ledger under the
session's run: Claude Code goes on after a SessionStart hook says ``continue: false`` in a
headless run, so hookgate itself refuses the session's prompts and tool calls from then on.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from hookgate.agent import Agent
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.catalog.build import build_registry
from hookgate.claude_code.policy import ExternalPolicy, probe_context
from hookgate.external import decisions, sessions
from hookgate.external.approvals import ExternalApprovals
from hookgate.hooks.approval import ApprovalOutcome
from hookgate.hooks.coverage import RetryReuse
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookContext, HookPoint
from hookgate.hooks.registry import HookRegistry
from hookgate.hooks.services import HookServices
from hookgate.hooks.withheld import Withheld
from hookgate.storage.ledger import DatabaseLedger
from hookgate.tools.calls import CallIdentity, ToolCall, ToolOutcome
from hookgate.tools.errors import ToolArgumentsError
from hookgate.tools.guarded import build_metadata, decide_call, observe_result
from hookgate.tools.tool import args_digest

EVENTS = ("PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure",
          "SessionStart", "UserPromptSubmit", "Stop")
#: What Claude Code sets CLAUDE_CODE_ENTRYPOINT to in headless (-p / SDK) runs.
HEADLESS_ENTRYPOINTS = ("sdk-cli", "sdk-ts", "sdk-py")
#: The ledger entry of a session its SessionStart chain stopped (the reason is its record).
SESSION_STOPPED = "claude-code-session-stopped"

Answer = dict[str, Any]


class BadHookInput(ValueError):
    """The body is not a Claude Code hook input hookgate can act on."""


@dataclass(frozen=True, slots=True)
class HookCaller:
    """Who sent the hook call, and how Claude Code runs (headless: ``-p`` or the SDK)."""

    user_id: str
    org_id: str | None
    headless: bool


class ClaudeCodeBackend:
    """Answers hook calls for the agents of one server."""

    def __init__(self, approvals: PersistentApprovals, services: HookServices,
                 ledger: DatabaseLedger) -> None:
        self.approvals = approvals
        self.services = services
        self.ledger = ledger

    async def answer(self, agent: Agent, caller: HookCaller, body: Mapping[str, Any]
                     ) -> Answer:
        event = body.get("hook_event_name")
        if event not in EVENTS:
            raise BadHookInput(f"hook_event_name must be one of {', '.join(EVENTS)}, got "
                               f"{event!r}")
        session = _text(body, "session_id")
        run_id = session_run_id(agent.id, caller.user_id, session)
        call = _Call(self, agent, caller, body, event, run_id)
        if event == "SessionStart":
            return await call.session_start()
        if event in ("PreToolUse", "PermissionRequest", "UserPromptSubmit"):
            stopped = await self.ledger.recorded(run_id, SESSION_STOPPED)
            if stopped is not None:
                return call.refuse_stopped(stopped.observation or "stopped by hookgate")
        if event in ("PreToolUse", "PermissionRequest"):
            return await call.decide()
        if event in ("PostToolUse", "PostToolUseFailure"):
            return await call.observe()
        return {}


def session_run_id(agent_id: str, user_id: str, session: str) -> str:
    """The run id of a Claude Code session of ``user_id`` under ``agent_id``."""
    return sessions.session_run_id("cc-", agent_id, user_id, session)


class _Call:
    """One hook call: its agent, caller, input and the run and call identity it maps to."""

    def __init__(self, backend: ClaudeCodeBackend, agent: Agent, caller: HookCaller,
                 body: Mapping[str, Any], event: str, run_id: str) -> None:
        self.backend = backend
        self.agent = agent
        self.caller = caller
        self.body = body
        self.event = event
        self.identity = CallIdentity(
            agent_id=agent.id, user_id=caller.user_id, org_id=agent.org_id or caller.org_id,
            run_id=run_id, conversation_id=_text(body, "session_id"),
            execution_path="external",
            require_confirmation_for_all=agent.require_confirmation_for_all,
            transcript_path=_text(body, "transcript_path", required=False),
        )
        self.extras: dict[str, Any] = {
            "claude_code_event": event,
            "cwd": _text(body, "cwd", required=False),
            "permission_mode": _text(body, "permission_mode", required=False),
            "prompt_id": _text(body, "prompt_id", required=False),
            "transcript_path": _text(body, "transcript_path", required=False),
        }

    # -- PreToolUse / PermissionRequest ------------------------------------------------------

    def _tool_call(self) -> tuple[str, dict[str, Any], str]:
        name = _text(self.body, "tool_name")
        args = self.body.get("tool_input")
        if not isinstance(args, dict):
            raise BadHookInput("tool_input must be a JSON object")
        call_id = self.body.get("tool_use_id")
        if call_id is None:
            # PermissionRequest carries no tool_use_id: the call is its tool and arguments.
            call_id = f"perm-{args_digest({'tool': name, 'args': args})[:32]}"
        if not isinstance(call_id, str) or not call_id or len(call_id) > 100:
            raise BadHookInput("tool_use_id must be a string of at most 100 characters")
        return name, args, call_id

    def _registry(self, services: HookServices) -> HookRegistry:
        return build_registry(self.agent, services)

    def _answer_pre(self, decision: str | None, reason: str | None,
                    ctx: HookContext | None = None,
                    updated: dict[str, Any] | None = None) -> Answer:
        answer: Answer = {}
        if self.event == "PermissionRequest":
            if decision in ("allow", "deny"):
                verdict: dict[str, Any] = {"behavior": decision}
                if decision == "deny":
                    verdict["message"] = reason or "denied by hookgate"
                elif updated is not None:
                    verdict["updatedInput"] = updated
                answer["hookSpecificOutput"] = {"hookEventName": "PermissionRequest",
                                                "decision": verdict}
            return answer
        specific: dict[str, Any] = {"hookEventName": "PreToolUse"}
        if decision is not None:
            specific["permissionDecision"] = decision
            if reason:
                specific["permissionDecisionReason"] = reason
        if updated is not None:
            specific["updatedInput"] = updated
        notes = ctx.added_context if ctx is not None else None
        if notes:
            specific["additionalContext"] = "\n\n".join(map(str, notes))
        if len(specific) > 1:
            answer["hookSpecificOutput"] = specific
        stop = ctx.stop_run if ctx is not None else None
        if stop:
            answer.update({"continue": False, "stopReason": str(stop)})
        return answer

    async def decide(self) -> Answer:
        backend = self.backend
        name, raw_args, call_id = self._tool_call()
        try:
            policy = ExternalPolicy.of(self.agent)
        except HookBuildError as exc:
            return self._answer_pre("deny", f"hookgate cannot apply its rules, so nothing "
                                            f"runs: {exc}")
        probe = probe_context(name, raw_args, self.agent, self.caller.user_id, dict(self.extras))
        tool = policy.tool_for(name, probe)
        try:
            args = tool.validate(raw_args)
        except ToolArgumentsError as exc:
            return self._answer_pre("deny", f"hookgate: {exc}")
        # Interactive mode has no `defer`: it is told to make the identical call again, and
        # does so under a new tool_use_id (the one exception, hookgate.hooks.coverage).
        approvals = ExternalApprovals(
            backend.approvals, backend.ledger, policy.wait_s,
            retry=None if self.caller.headless else RetryReuse.IDENTICAL_CALL_AFTER_GIVE_UP)
        try:
            registry = self._registry(replace(backend.services, approvals=approvals))
        except HookBuildError as exc:
            return self._answer_pre("deny", f"hookgate cannot build agent '{self.agent.id}''s "
                                            f"hooks, so nothing runs: {exc}")
        decided = await decide_call(ToolCall(call_id, name, args), tool, args,
                                    registry=registry, identity=self.identity,
                                    metadata=self.extras)
        if isinstance(decided, ToolOutcome):
            # The gate's StillPending is a hook failure to the registry (the call is
            # blocked, observers record the attempt); the answer says what it waits for.
            if approvals.pending is not None:
                return self._answer_pending(approvals.pending.id, name)
            return self._answer_pre("deny", decided.observation)
        ctx, final_args, pre = decided
        updated = final_args if pre.modified_args is not None else None
        decision = None if ctx.approval is None else ctx.approval.decision
        if decision is not None:
            # For the audit row written when Claude Code reports the call at PostToolUse.
            await decisions.keep(backend.ledger, self.identity.run_id, call_id, name,
                                 args_digest(final_args), decision)
        if approvals.by_rule is not None:
            return self._answer_pre("allow", f"{approvals.by_rule} in hookgate", ctx, updated)
        if approvals.used is not None:
            used = approvals.used
            who = f" by {used.responded_by}" if used.responded_by else ""
            why = f": {used.reason}" if used.reason else ""
            return self._answer_pre("allow", f"approved{who} in hookgate (request {used.id}){why}",
                                    ctx, updated)
        return self._answer_pre("allow" if updated is not None else None, None, ctx, updated)

    def refuse_stopped(self, reason: str) -> Answer:
        """The answer to a prompt or tool call of a session its SessionStart stopped."""
        if self.event == "UserPromptSubmit":
            return {"decision": "block", "reason": reason, "continue": False,
                    "stopReason": reason}
        return {**self._answer_pre("deny", reason), "continue": False, "stopReason": reason}

    def _answer_pending(self, request_id: str, tool_name: str) -> Answer:
        if self.caller.headless and self.event == "PreToolUse":
            # -p mode: the run ends with the call deferred; `claude -p --resume` asks again
            # with the same tool_use_id once a person decided.
            return self._answer_pre("defer", f"waiting for a person's approval in hookgate "
                                             f"(request {request_id})")
        return self._answer_pre(
            "deny", f"'{tool_name}' needs a person's approval in hookgate: request {request_id} "
                    "is pending. Once it is approved, make the identical call again; it will "
                    "run once without asking again.")

    async def observe(self) -> Answer:
        backend = self.backend
        name = _text(self.body, "tool_name")
        args = self.body.get("tool_input")
        if not isinstance(args, dict):
            raise BadHookInput("tool_input must be a JSON object")
        call_id = _text(self.body, "tool_use_id")
        policy = ExternalPolicy.of(self.agent)
        probe = probe_context(name, args, self.agent, self.caller.user_id, dict(self.extras))
        tool = policy.tool_for(name, probe)
        registry = self._registry(backend.services)
        call = ToolCall(call_id, name, args)
        ctx = HookContext(
            hook_point=HookPoint.POST_TOOL_USE, tool_name=name, tool_args=args,
            agent_id=self.agent.id, user_id=self.caller.user_id,
            metadata={**self.extras, **build_metadata(self.identity, call, tool, False)},
        )
        duration = self.body.get("duration_ms")
        seconds = duration / 1000 if isinstance(duration, int | float) and duration >= 0 else 0
        ctx.call_started = time.perf_counter() - seconds
        try:
            digest = args_digest(args)
        except ToolArgumentsError:
            digest = None
        kept = None if digest is None else await decisions.kept(
            backend.ledger, self.identity.run_id, call_id, name, digest)
        if kept is not None:
            ctx.approval = ApprovalOutcome("approved", kept.request_id, decision=kept)
        failed = self.event == "PostToolUseFailure"
        result = self.body.get("error") if failed else self.body.get("tool_response")
        # What Claude Code reported the tool said: hooks read it (``tool_result``); every
        # other place (audit rows, logs) gets the fixed words.
        error = Withheld.of(str(self.body.get("error") or "the tool failed"),
                            shown=f"Error: tool '{name}' failed.") if failed else None
        post = await observe_result(ctx, registry, result, error)
        specific: dict[str, Any] = {"hookEventName": self.event}
        answer: Answer = {}
        if post.withheld:
            specific["updatedToolOutput"] = ctx.tool_result
        elif post.modified_result is not None:
            specific["updatedToolOutput"] = post.modified_result
        notes = ctx.added_context
        if notes and not post.withheld:
            specific["additionalContext"] = "\n\n".join(map(str, notes))
        if len(specific) > 1:
            answer["hookSpecificOutput"] = specific
        if post.withheld:
            # Claude Code ignores updatedToolOutput for its own tools, so the only way to keep
            # withheld output from its model is to stop the session before the next turn.
            answer.update({"continue": False, "stopReason": str(ctx.stop_run or ctx.tool_result)})
        elif ctx.stop_run:
            answer.update({"continue": False, "stopReason": str(ctx.stop_run)})
        return answer

    async def session_start(self) -> Answer:
        backend = self.backend
        registry = self._registry(backend.services)
        ctx = HookContext(
            hook_point=HookPoint.SESSION_START, agent_id=self.agent.id,
            user_id=self.caller.user_id,
            metadata={**self.extras, "org_id": self.identity.org_id,
                      "run_id": self.identity.run_id, "conversation_id": self.identity.run_id,
                      "execution_path": "external", "parent_agent_id": None, "depth": 0},
        )
        result = await registry.run_session_start(ctx)
        if not result.allow:
            reason = f"hookgate stopped the session at SessionStart: {result.error or 'a hook'}"
            ledger = self.backend.ledger
            if await ledger.claim(self.identity.run_id, SESSION_STOPPED, "SessionStart",
                                  "") is None:
                await ledger.finish(self.identity.run_id, SESSION_STOPPED, reason, ok=False)
            return {"continue": False, "stopReason": reason}
        if result.additional_context:
            return {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                           "additionalContext": result.additional_context}}
        return {}


def _text(body: Mapping[str, Any], key: str, *, required: bool = True) -> Any:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value or len(value) > 4096:
        raise BadHookInput(f"'{key}' must be a non-empty string")
    return value
