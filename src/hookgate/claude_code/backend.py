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

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hookgate.agent import Agent
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.canonical import NotCanonicalJSON, canonical_sha256
from hookgate.claude_code.policy import WRITING_TOOLS as _WRITING
from hookgate.claude_code.policy import ExternalPolicy, connector_of
from hookgate.external.call import ACTING_SERVICE_KEY, ExternalCall, build_call
from hookgate.external.core import Allowed, Denied, ExternalCore, ReportInProgress
from hookgate.external.keys import BadId, checked_id
from hookgate.external.keys import session_run_id as _session_run_id
from hookgate.hooks.coverage import RetryReuse
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookContext
from hookgate.hooks.services import HookServices
from hookgate.tools.calls import CallIdentity
from hookgate.tools.errors import ToolArgumentsError
from hookgate.tools.tool import args_digest

if TYPE_CHECKING:
    from hookgate.storage.ledger import DatabaseLedger

EVENTS = ("PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure",
          "SessionStart", "UserPromptSubmit", "Stop")
#: What Claude Code sets CLAUDE_CODE_ENTRYPOINT to in headless (-p / SDK) runs.
HEADLESS_ENTRYPOINTS = ("sdk-cli", "sdk-ts", "sdk-py")

Answer = dict[str, Any]


class BadHookInput(ValueError):
    """The body is not a Claude Code hook input hookgate can act on."""


@dataclass(frozen=True, slots=True)
class HookCaller:
    """Who sent the hook call, and how Claude Code runs (headless: ``-p`` or the SDK)."""

    user_id: str
    org_id: str | None
    headless: bool
    #: Whom the hook call acts for (``Hookgate-Acts-For``, as `authority.acting_for`
    #: answered): the calls' initiator; None: nobody (a service acting for no person).
    initiator: str | None = None


class ClaudeCodeBackend:
    """Answers hook calls for the agents of one server (a codec over the external core)."""

    def __init__(self, approvals: PersistentApprovals, services: HookServices,
                 ledger: DatabaseLedger) -> None:
        self.core = ExternalCore(approvals, services, ledger)

    async def answer(self, agent: Agent, caller: HookCaller, body: Mapping[str, Any]
                     ) -> Answer:
        event = body.get("hook_event_name")
        if event not in EVENTS:
            raise BadHookInput(f"hook_event_name must be one of {', '.join(EVENTS)}, got "
                               f"{event!r}")
        session = _id(body, "session_id", 4096)
        run_id = session_run_id(agent.id, caller.user_id, session,
                                None if caller.initiator == caller.user_id
                                else (caller.initiator,))
        call = _Call(self, agent, caller, body, event, run_id)
        if event == "SessionStart":
            return await call.session_start()
        if event in ("PreToolUse", "PermissionRequest", "UserPromptSubmit"):
            # Claude Code sends SessionStart to command hooks only (the forward command):
            # a session hookgate never saw start runs its SessionStart chain first, once.
            try:
                await self.core.session_before_call(agent, call.session_identity(),
                                                    call.extras)
            except ReportInProgress as exc:
                raise BadHookInput(str(exc)) from None
            stopped = await self.core.stopped(run_id)
            if stopped is not None:
                return call.refuse_stopped(stopped)
        if event == "UserPromptSubmit":
            prompt = body.get("prompt")
            if isinstance(prompt, str) and prompt:
                # What the user asked: a trusted fact of the session (hookgate.provenance).
                try:
                    await self.core.keep_request(agent, call.identity, prompt)
                except HookBuildError as exc:
                    raise BadHookInput(f"hookgate cannot build agent '{agent.id}''s hooks: "
                                       f"{exc}") from None
        if event in ("PreToolUse", "PermissionRequest"):
            return await call.decide()
        if event in ("PostToolUse", "PostToolUseFailure"):
            return await call.observe()
        return {}


def session_run_id(agent_id: str, user_id: str, session: str,
                   acting: tuple[str | None] | None = None) -> str:
    """The run id of a Claude Code session of ``user_id`` under ``agent_id`` (``acting``:
    whom a service identity's session acts for, see keys.session_run_id)."""
    return _session_run_id("cc-", agent_id, user_id, session, acting)


class _Call:
    """One hook call: its agent, caller, input and the run and call identity it maps to."""

    def __init__(self, backend: ClaudeCodeBackend, agent: Agent, caller: HookCaller,
                 body: Mapping[str, Any], event: str, run_id: str) -> None:
        self.core = backend.core
        self.agent = agent
        self.caller = caller
        self.body = body
        self.event = event
        self.run_id = run_id
        self.session_id = _id(body, "session_id", 4096)
        self.transcript_path = _text(body, "transcript_path", required=False)
        self.identity = CallIdentity(
            agent_id=agent.id, user_id=caller.initiator, org_id=agent.org_id or caller.org_id,
            run_id=run_id, conversation_id=self.session_id, execution_path="external",
            require_confirmation_for_all=agent.require_confirmation_for_all,
            transcript_path=self.transcript_path,
        )
        self.extras: dict[str, Any] = {
            "coding_agent": "claude-code",
            "claude_code_event": event,
            "cwd": _text(body, "cwd", required=False),
            "permission_mode": _text(body, "permission_mode", required=False),
            "prompt_id": _text(body, "prompt_id", required=False),
            "transcript_path": self.transcript_path,
            ACTING_SERVICE_KEY: (caller.user_id if caller.initiator != caller.user_id
                                 else None),
        }

    def _typed(self, policy: ExternalPolicy, name: str, args: dict[str, Any], call_id: str, *,
               checked: bool) -> ExternalCall:
        """The typed call (ToolArgumentsError: the arguments do not fit the declaration)."""
        return build_call(self.agent, policy, user_id=self.caller.user_id,
                          initiator=self.caller.initiator, org_id=self.caller.org_id,
                          session_id=self.session_id,
                          call_id=call_id, run_id=self.run_id, tool_name=name, arguments=args,
                          writes=name in _WRITING, connector=connector_of(name),
                          metadata=self.extras, transcript_path=self.transcript_path,
                          checked=checked)

    # -- PreToolUse / PermissionRequest ------------------------------------------------------

    def _tool_call(self) -> tuple[str, dict[str, Any], str]:
        name = _text(self.body, "tool_name")
        args = self.body.get("tool_input")
        if not isinstance(args, dict):
            raise BadHookInput("tool_input must be a JSON object")
        call_id = self.body.get("tool_use_id")
        if call_id is None:
            # PermissionRequest carries no tool_use_id: the call is its tool and arguments,
            # run where it is asked from (the same command elsewhere is another call).
            call_id = f"perm-{args_digest({'tool': name, 'args': args, **_cwd(self.body)})[:32]}"
        try:
            return name, args, checked_id("tool_use_id", call_id, 100)
        except BadId as exc:
            raise BadHookInput(str(exc)) from None

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
        name, raw_args, call_id = self._tool_call()
        try:
            policy = ExternalPolicy.of(self.agent)
            call = self._typed(policy, name, raw_args, call_id, checked=True)
        except HookBuildError as exc:
            return self._answer_pre("deny", f"hookgate cannot apply its rules, so nothing "
                                            f"runs: {exc}")
        except ToolArgumentsError as exc:
            return self._answer_pre("deny", f"hookgate: {exc}")
        # Interactive mode has no `defer`: it is told to make the identical call again, and
        # does so under a new tool_use_id (the one exception, hookgate.hooks.coverage).
        verdict = await self.core.decide(
            call, wait_s=policy.wait_s,
            retry=None if self.caller.headless else RetryReuse.IDENTICAL_CALL_AFTER_GIVE_UP)
        if isinstance(verdict, Denied):
            return self._answer_pre("deny", verdict.reason)
        if not isinstance(verdict, Allowed):
            return self._answer_pending(verdict.request_id, name)
        final_args = verdict.arguments
        updated = final_args if verdict.rewritten or final_args != raw_args else None
        ctx, approved = verdict.ctx, verdict.approved_by()
        if approved is not None:
            return self._answer_pre("allow", approved, ctx, updated)
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
        name = _text(self.body, "tool_name")
        args = self.body.get("tool_input")
        if not isinstance(args, dict):
            raise BadHookInput("tool_input must be a JSON object")
        call_id = _id(self.body, "tool_use_id", 100)
        try:
            policy = ExternalPolicy.of(self.agent)
        except HookBuildError:
            policy = ExternalPolicy()
        call = self._typed(policy, name, args, call_id, checked=False)
        duration = self.body.get("duration_ms")
        seconds = duration / 1000 if isinstance(duration, int | float) and duration >= 0 else 0
        try:
            digest: str | None = args_digest(args)
        except ToolArgumentsError:
            digest = None
        failed = self.event == "PostToolUseFailure"
        result = self.body.get("error") if failed else self.body.get("tool_response")
        error = str(self.body.get("error") or "the tool failed") if failed else None

        async def post_tool_use() -> str:
            # What Claude Code reported the tool said: hooks read it (``tool_result``);
            # every other place (audit rows, logs) gets the fixed words.
            observed = await self.core.observe(call, result=result, error=error,
                                               started_at=time.perf_counter() - seconds,
                                               digest=digest)
            return json.dumps(self._answer_post(observed.ctx, observed.post))

        try:
            # The tool is part of the report: one naming another tool under this id is
            # another report, never the answer to this one's.
            report = canonical_sha256([self.event, name, args, result])
        except NotCanonicalJSON:
            report = None  # no exact form to recognise it by: its PostToolUse runs
        if report is None:
            return json.loads(await post_tool_use())  # type: ignore[no-any-return]
        try:
            # Once per report: the same PostToolUse delivered twice (a retry, two
            # instances) answers the first one's answer; another output is another report.
            answer = json.loads(await self.core.once(call, post_tool_use, report=report))
        except ReportInProgress as exc:
            raise BadHookInput(str(exc)) from None
        return answer if isinstance(answer, dict) else {}

    def _answer_post(self, ctx: HookContext, post: Any) -> Answer:
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

    def session_identity(self) -> CallIdentity:
        return CallIdentity(
            agent_id=self.agent.id, user_id=self.caller.initiator,
            org_id=self.identity.org_id, run_id=self.run_id, conversation_id=self.run_id,
            execution_path="external")

    async def session_start(self) -> Answer:
        verdict = await self.core.start_session(self.agent, self.session_identity(),
                                                self.extras)
        if verdict.stopped is not None:
            return {"continue": False, "stopReason": verdict.stopped}
        if verdict.context:
            return {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                           "additionalContext": verdict.context}}
        return {}


def _id(body: Mapping[str, Any], key: str, limit: int) -> str:
    try:
        return checked_id(key, body.get(key), limit)
    except BadId as exc:
        raise BadHookInput(str(exc)) from None


def _text(body: Mapping[str, Any], key: str, *, required: bool = True) -> Any:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value or len(value) > 4096:
        raise BadHookInput(f"'{key}' must be a non-empty string")
    return value


def _cwd(body: Mapping[str, Any]) -> dict[str, Any]:
    """The hook input's ``cwd`` as a part of a derived call id (nothing when absent)."""
    cwd = body.get("cwd")
    return {"cwd": cwd} if isinstance(cwd, str) else {}
