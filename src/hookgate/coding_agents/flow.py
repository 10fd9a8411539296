"""One coding agent's hook call through the external core: SessionStart, the user's prompt
(kept as the session's request, so rules tell values the user gave from values read in
untrusted results: hookgate.provenance), PreToolUse (the agent's rules, hooks, Cedar, the
gate; the session's SessionStart first if it never ran) and PostToolUse (audit, telemetry;
output withheld or rewritten by a hook replaced for the model), for any agent's `HookInput`.

The rules are the agent's coding-agent rules (its ``coding_agents`` section, or
``claude_code`` under its earlier name; external/coding/policy.py), matched on hookgate's
tool names, so one rule holds for every coding agent. None of these agents can
wait for a person past its hook timeout: a call still pending is refused with the request's
id and told to repeat the identical call, which then joins that request
(`RetryReuse.IDENTICAL_CALL_AFTER_GIVE_UP`) and runs once after approval. An agent that
sends no call id (Copilot CLI, Gemini CLI) gets one derived by hookgate (coding_agents/call_ids.py),
under which the identical retry is the same call: no exception is needed for it.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from hookgate.agent import Agent
from hookgate.canonical import NotCanonicalJSON, canonical_sha256
from hookgate.coding_agents.call_ids import CallOccurrences
from hookgate.coding_agents.codec import BadHookInput, Event, HookInput, Outcome
from hookgate.coding_agents.tools import connector_of, writes
from hookgate.external.call import ExternalCall, build_call
from hookgate.external.coding.policy import CodingAgentPolicy
from hookgate.external.core import (
    Allowed,
    Denied,
    ExternalCore,
    ReportInProgress,
    observation_text,
)
from hookgate.external.keys import BadId, checked_id, session_run_id
from hookgate.hooks.coverage import RetryReuse
from hookgate.hooks.errors import HookBuildError
from hookgate.tools.calls import CallIdentity
from hookgate.tools.errors import ToolArgumentsError
from hookgate.tools.tool import args_digest

__all__ = ["Caller", "CodingAgentHooks", "pending_reason"]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent the hook call (the developer's hookgate token)."""

    user_id: str
    org_id: str | None


def pending_reason(request_id: str, tool_name: str) -> str:
    """What the agent (and its model) read while a person has not decided yet."""
    return (f"approval {request_id} pending: repeat the identical call after approval "
            f"('{tool_name}' needs a person's approval in hookgate; it then runs once)")


class CodingAgentHooks:
    """Answers the hook calls of one kind of coding agent over the external core."""

    def __init__(self, core: ExternalCore, kind: str) -> None:
        self.core = core
        self.kind = kind

    async def answer(self, agent: Agent, caller: Caller, hook: HookInput) -> Outcome:
        call = _HookCall(self, agent, caller, hook)
        if hook.event is Event.SESSION_START:
            verdict = await self.core.start_session(agent, call.identity(), call.facts)
            return Outcome(refused=verdict.stopped, context=verdict.context)
        if hook.event in (Event.PRE_TOOL_USE, Event.USER_PROMPT):
            try:
                await self.core.session_before_call(agent, call.identity(), call.facts)
            except ReportInProgress as exc:
                return Outcome(refused=f"hookgate: {exc}")
            stopped = await self.core.stopped(call.run_id)
            if stopped is not None:
                return Outcome(refused=stopped)
            if hook.event is Event.USER_PROMPT:
                return await call.keep_request()
            return await call.decide()
        return await call.observe()


class _HookCall:
    """One hook call: its agent, caller, input and the run it belongs to."""

    def __init__(self, hooks: CodingAgentHooks, agent: Agent, caller: Caller,
                 hook: HookInput) -> None:
        self.core = hooks.core
        self.kind = hooks.kind
        self.agent = agent
        self.caller = caller
        self.hook = hook
        self.run_id = session_run_id(f"{hooks.kind}-", agent.id, caller.user_id,
                                     hook.session_id)
        self.facts: dict[str, Any] = {"coding_agent": hooks.kind, "cwd": hook.cwd,
                                      "transcript_path": hook.transcript_path, **hook.facts}
        self.call_id = hook.call_id
        #: The call's occurrences when hookgate derives its id (the agent sends none).
        self.occurrences = None if hook.call_id is not None or hook.tool_name is None \
            else CallOccurrences.of(hooks.core.ledger, self.run_id, hook)

    def identity(self) -> CallIdentity:
        return CallIdentity(agent_id=self.agent.id, user_id=self.caller.user_id,
                            org_id=self.agent.org_id or self.caller.org_id, run_id=self.run_id,
                            conversation_id=self.run_id, execution_path="external")

    def _typed(self, policy: CodingAgentPolicy, *, checked: bool) -> ExternalCall:
        name, call_id = self.hook.tool_name, self.call_id
        if not name or not call_id:
            raise BadHookInput("a tool call needs its tool name and call id")
        try:
            call_id = checked_id("tool_use_id", call_id, 100)
        except BadId as exc:
            raise BadHookInput(str(exc)) from None
        # The token's user asks for themself (no acts-for header on these agents yet).
        return build_call(self.agent, policy, user_id=self.caller.user_id,
                          initiator=self.caller.user_id, org_id=self.caller.org_id,
                          session_id=self.hook.session_id,
                          call_id=call_id, run_id=self.run_id, tool_name=name,
                          arguments=self.hook.arguments, writes=writes(name),
                          connector=connector_of(self.kind, name), metadata=self.facts,
                          transcript_path=self.hook.transcript_path, checked=checked)

    async def keep_request(self) -> Outcome:
        """What the user asked, kept as a trusted fact of the session; then go on."""
        if self.hook.prompt:
            try:
                await self.core.keep_request(self.agent, self.identity(), self.hook.prompt)
            except HookBuildError as exc:
                return Outcome(refused=f"hookgate cannot build agent '{self.agent.id}''s "
                                       f"hooks, so nothing runs: {exc}")
        return Outcome()

    async def decide(self) -> Outcome:
        occurrence = None
        if self.occurrences is not None:
            occurrence = await self.occurrences.current()
            self.call_id = self.occurrences.call_id(occurrence)
        try:
            policy = CodingAgentPolicy.of(self.agent)
            call = self._typed(policy, checked=True)
        except HookBuildError as exc:
            return Outcome(refused=f"hookgate cannot apply its rules, so nothing runs: {exc}")
        except ToolArgumentsError as exc:
            return Outcome(refused=f"hookgate: {exc}")
        # A derived id is the same for the identical retry: its own request covers it.
        retry = None if occurrence is not None else RetryReuse.IDENTICAL_CALL_AFTER_GIVE_UP
        verdict = await self.core.decide(call, wait_s=policy.wait_s, retry=retry)
        if isinstance(verdict, Denied):
            return Outcome(refused=verdict.reason)
        if not isinstance(verdict, Allowed):
            return Outcome(refused=pending_reason(verdict.request_id, call.tool.name))
        if verdict.rewritten:
            # No hook answer of these agents replaces a call's arguments: the call that
            # would run is not the one hookgate allowed.
            return Outcome(refused=f"hookgate allowed '{call.tool.name}' only with changed "
                                   f"arguments, which {self.kind} cannot apply, so it does "
                                   "not run")
        if self.occurrences is not None and occurrence is not None:
            await self.occurrences.allowed(occurrence)
        notes = verdict.ctx.added_context
        return Outcome(context="\n\n".join(map(str, notes)) if notes else None,
                       approved=verdict.approved_by())

    async def observe(self) -> Outcome:
        if self.occurrences is not None:
            self.call_id = self.occurrences.call_id(await self.occurrences.last_allowed())
        try:
            policy = CodingAgentPolicy.of(self.agent)
        except HookBuildError:
            policy = CodingAgentPolicy()
        call = self._typed(policy, checked=False)
        args, result = self.hook.arguments, self.hook.result
        try:
            digest: str | None = args_digest(args)
        except ToolArgumentsError:
            digest = None

        async def post_tool_use() -> str:
            observed = await self.core.observe(call, result=result, error=None,
                                               started_at=time.perf_counter(), digest=digest)
            post, ctx = observed.post, observed.ctx
            if post.withheld:
                return json.dumps({"refused": f"hookgate withheld this output: "
                                              f"{ctx.stop_run or ctx.tool_result}"})
            if post.modified_result is None and not ctx.added_context:
                return json.dumps({})
            text, _ = observation_text(observed, result, None)
            return json.dumps({"replaced": text})

        try:
            held = json.loads(await self.core.once(call, post_tool_use,
                                                   report=_report(self.hook, args,
                                                                  result)))
        except ReportInProgress as exc:
            raise BadHookInput(str(exc)) from None
        refused, replaced = held.get("refused"), held.get("replaced")
        return Outcome(refused=refused if isinstance(refused, str) else None,
                       replaced=replaced if isinstance(replaced, str) else None)


def _report(hook: HookInput, args: Any, result: Any) -> str:
    """What names one report of a call: the digest of its event, tool, arguments and result
    (a report naming another tool under the call's id is another report, whose hooks run);
    for a value canonical JSON refuses (1e999, NaN, a lone surrogate) a digest of its
    escaped form, so that the same report sent twice still runs PostToolUse once."""
    named = [hook.event.value, hook.tool_name, args, result]
    try:
        return canonical_sha256(named)
    except NotCanonicalJSON:
        text = json.dumps(named, sort_keys=True, ensure_ascii=True, allow_nan=True,
                          default=repr)
        return "loose-" + hashlib.sha256(text.encode("ascii")).hexdigest()
