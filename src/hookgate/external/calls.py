"""Guarded calls for agents that run elsewhere (framework adapters, the ``/api/v1`` routes):
a session starts, each tool call is asked before it runs and reported after, and every hook,
the gate, the read-only guard, rate limits and the audit chain apply as on the engines.

Exactly once: an allowed call's start is claimed in the execution ledger
(``started:<call id>`` under the session's run) before the answer goes out, so asking again
about a call that started returns ``already_ran`` with its recorded observation; approvals are
bound to (agent, session, call id, tool, argument digest) and used once
(external/approvals.py); a call id names one call, so re-using it with another tool or other
arguments is refused. Each call is indexed under its hookgate id (``gc_...``) for wait/report.
A session started with a parent (a sub-agent's) is recorded with its delegation depth, which
every call of the session carries into the hooks' context.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from hookgate.agent import Agent
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.approvals.records import ConfirmationRequest
from hookgate.canonical import canonical_json
from hookgate.catalog.build import build_registry
from hookgate.catalog.builtin.rate_limit import COUNTED_KEY
from hookgate.external import decisions
from hookgate.external.approvals import ExternalApprovals
from hookgate.external.policy import TOOL_SCHEMA_KEY, CallRules, probe_context
from hookgate.external.sessions import session_run_id
from hookgate.hooks.approval import ApprovalOutcome
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookContext, HookPoint
from hookgate.hooks.services import HookServices
from hookgate.hooks.withheld import Withheld
from hookgate.storage.ledger import DatabaseLedger
from hookgate.tools.calls import CallIdentity, ToolCall, ToolOutcome
from hookgate.tools.errors import ToolArgumentsError
from hookgate.tools.guarded import (
    build_metadata,
    decide_call,
    observe_result,
    with_hook_context,
)
from hookgate.tools.tool import Tool, args_digest

#: The agent's section of rules for guarded calls (model_config_json.guarded_calls).
SECTION = "guarded_calls"
#: The run every call's index entry is kept under, by its hookgate id.
INDEX_RUN = "guarded-calls"
SESSION_STOPPED = "guarded-session-stopped"
#: The run every session's record (its parent and delegation depth) is kept under.
SESSIONS_RUN = "guarded-sessions"
FRAMEWORKS_MAX = 64
#: Whether the asker still waits for the answer (a long-poll's client still connected).
Listening = Callable[[], Awaitable[bool]]
Decision = Literal["allow", "deny", "pending", "already_ran", "decided"]


class CallRefused(ValueError):
    """The request cannot be acted on (bad input, a re-used call id); the text says why."""


class CallIdReused(CallRefused):
    """A call id already named another call (another tool or other arguments)."""


class CallNotFound(LookupError):
    """No call with this id for this user."""


@dataclass(frozen=True, slots=True)
class Asker:
    """Who asks: the user, their org and the framework the agent runs on (an empty user:
    the in-process guard, for waits and reports of any of its calls)."""

    user_id: str
    org_id: str | None
    framework: str


@dataclass(frozen=True, slots=True)
class SessionAnswer:
    session_id: str
    context: str | None
    stopped: str | None = None


@dataclass(frozen=True, slots=True)
class CallAnswer:
    call: str
    decision: Decision
    arguments: dict[str, Any] | None = None
    note: str | None = None
    reason: str | None = None
    request_id: str | None = None
    observation: str | None = None
    #: With ``decided`` (a peek): whether a person approved.
    approved: bool | None = None


@dataclass(frozen=True, slots=True)
class ObservationAnswer:
    call: str
    text: str
    withheld: bool


@dataclass(frozen=True, slots=True)
class _Facts:
    """What the index keeps of a call: enough to ask again and to report."""

    agent_id: str
    user_id: str
    session_id: str
    call_id: str
    tool_name: str
    arguments: dict[str, Any]
    framework: str
    parent_session: str | None
    description: str | None = None
    parameters: dict[str, Any] | None = None
    #: How many delegations down from a session without a parent (0: a top-level session).
    depth: int = 0
    parent_agent_id: str | None = None

    @property
    def run_id(self) -> str:
        return session_run_id("ext-", self.agent_id, self.user_id, self.session_id)

    def identity(self, agent: Agent, org_id: str | None) -> CallIdentity:
        return CallIdentity(agent_id=agent.id, user_id=self.user_id,
                            org_id=agent.org_id or org_id, run_id=self.run_id,
                            conversation_id=self.session_id, execution_path="external",
                            require_confirmation_for_all=agent.require_confirmation_for_all,
                            parent_agent_id=self.parent_agent_id, depth=self.depth,
                            parent_session=self.parent_session)

    def extras(self) -> dict[str, Any]:
        return {"framework": self.framework, "session_id": self.session_id,
                "parent_session": self.parent_session, "depth": self.depth,
                "parent_agent_id": self.parent_agent_id, TOOL_SCHEMA_KEY: self.parameters,
                "tool_description": self.description}

    def tool(self, agent: Agent, rules: CallRules, args: dict[str, Any]) -> Tool:
        probe = probe_context(self.tool_name, args, agent, self.user_id, self.extras())
        return rules.tool(self.tool_name, probe, writes=True, connector=self.framework,
                          schema=self.parameters,
                          description=self.description)


def call_key(agent_id: str, user_id: str, session_id: str, call_id: str) -> str:
    """The hookgate id of a call: one per agent, user, session and call id."""
    return session_run_id("gc_", agent_id, user_id, f"{session_id}\0{call_id}")


def text_of(value: Any) -> str:
    """What a tool returned, as the text a model reads."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, default=str)
    except ValueError:
        return str(value)


class GuardedCalls:
    """Sessions, asks, waits and reports of the external agents of one process."""

    def __init__(self, approvals: PersistentApprovals, services: HookServices,
                 ledger: DatabaseLedger) -> None:
        self.approvals = approvals
        self.services = services
        self.ledger = ledger

    # -- sessions --------------------------------------------------------------------------

    async def start_session(self, agent: Agent, asker: Asker, session_id: str,
                            parent_session: str | None = None) -> SessionAnswer:
        _check_text("session_id", session_id, 256)
        if parent_session is not None:
            _check_text("parent_session", parent_session, 256)
        lineage = await self._lineage(agent, asker.user_id, session_id, parent_session)
        facts = _Facts(agent.id, asker.user_id, session_id, "", "", {}, asker.framework,
                       lineage.parent_session, depth=lineage.depth,
                       parent_agent_id=lineage.parent_agent_id)
        identity = facts.identity(agent, asker.org_id)
        registry = self._registry(agent, self.services)
        ctx = HookContext(
            hook_point=HookPoint.SESSION_START, agent_id=agent.id, user_id=asker.user_id,
            metadata={**facts.extras(), "org_id": identity.org_id, "run_id": identity.run_id,
                      "conversation_id": session_id, "execution_path": "external",
                      "parent_agent_id": identity.parent_agent_id, "depth": identity.depth},
        )
        result = await registry.run_session_start(ctx)
        if not result.allow:
            reason = f"hookgate stopped the session at SessionStart: {result.error or 'a hook'}"
            if await self.ledger.claim(identity.run_id, SESSION_STOPPED, "SessionStart",
                                       "") is None:
                await self.ledger.finish(identity.run_id, SESSION_STOPPED, reason, ok=False)
            return SessionAnswer(session_id, None, reason)
        return SessionAnswer(session_id, result.additional_context or None)

    # -- before the call -------------------------------------------------------------------

    async def ask(self, agent: Agent, asker: Asker, *, session_id: str, call_id: str,
                  tool: str, arguments: Mapping[str, Any], parent_session: str | None = None,
                  description: str | None = None,
                  parameters: Mapping[str, Any] | None = None) -> CallAnswer:
        """PreToolUse and the gate for a new call (or the same call asked again)."""
        _check_text("session_id", session_id, 256)
        _check_text("call_id", call_id, 100)
        _check_text("tool", tool, 256)
        if not isinstance(arguments, Mapping):
            raise CallRefused("arguments must be a JSON object")
        if parameters is not None and (not isinstance(parameters, Mapping)
                                       or parameters.get("type") != "object"):
            raise CallRefused("parameters must be the tool's JSON schema, of type object")
        try:
            digest = args_digest(dict(arguments))
        except ToolArgumentsError as exc:
            raise CallRefused(f"the arguments cannot be pinned: {exc}") from None
        if parent_session is not None:
            _check_text("parent_session", parent_session, 256)
        lineage = await self._lineage(agent, asker.user_id, session_id, parent_session)
        facts = _Facts(agent.id, asker.user_id, session_id, call_id, tool, dict(arguments),
                       asker.framework, lineage.parent_session, description,
                       dict(parameters) if parameters is not None else None,
                       depth=lineage.depth, parent_agent_id=lineage.parent_agent_id)
        key = call_key(agent.id, asker.user_id, session_id, call_id)
        prior = await self.ledger.claim(INDEX_RUN, key, tool, digest)
        if prior is not None and (prior.tool_name, prior.args_sha256) != (tool, digest):
            raise CallIdReused(
                f"call id '{call_id}' was already used in session '{session_id}' for another "
                "call (another tool or other arguments); a call id names one call, so this "
                "one is not run")
        if prior is None or prior.observation is None:
            await self.ledger.finish(INDEX_RUN, key, _facts_text(facts), ok=True)
        counted = prior is not None and await self.approvals.store.for_call(
            facts.run_id, call_id) is not None
        return await self._decide(agent, asker.org_id, key, facts, wait_s=0.0, counted=counted)

    async def wait(self, agents: Mapping[str, Agent], asker: Asker, call: str,
                   wait_s: float, listening: Listening | None = None) -> CallAnswer:
        """The call's state, waiting up to ``wait_s`` seconds for a person's decision;
        ``listening`` says whether the asker still waits for the answer (an allow is not
        recorded as started for a long-poll its client gave up).

        While the call's request is pending, the wait is on the request alone: the
        PreToolUse chain (rate limits, audit of the attempt) runs again only once it is
        decided, not on every poll."""
        facts = await self._facts(call, asker)
        agent = agents.get(facts.agent_id)
        if agent is None:
            raise CallNotFound(f"call '{call}' belongs to agent '{facts.agent_id}', which "
                               "this server no longer has")
        request = await self.approvals.store.for_call(facts.run_id, facts.call_id)
        if request is not None and request.pending and await self._already_ran(
                call, facts) is None:
            if await self._decided(request, wait_s) is None:
                return self._pending(call, facts, request.id)
            wait_s = 0.0
        return await self._decide(agent, asker.org_id, call, facts, wait_s=max(0.0, wait_s),
                                  listening=listening, counted=request is not None)

    async def peek(self, asker: Asker, call: str, wait_s: float) -> CallAnswer:
        """What a person decided on the call's request, waiting up to ``wait_s`` seconds,
        without starting the call or using the approval: ``pending`` while undecided, else
        ``decided`` (the call starts only when it is asked or waited on)."""
        facts = await self._facts(call, asker)
        ran = await self._already_ran(call, facts)
        if ran is not None:
            return ran
        request = await self.approvals.store.for_call(facts.run_id, facts.call_id)
        if request is None:
            raise CallRefused(f"no person was asked about call '{call}'; ask about the call "
                              "itself for its verdict")
        current = await self._decided(request, wait_s)
        if current is None:
            return self._pending(call, facts, request.id)
        approved = current.status == "approved"
        # What the person approved: their edit, else the arguments they were shown.
        approved_args = (current.edited_args if current.edited_args is not None
                         else current.args) if approved else None
        return CallAnswer(call, "decided", request_id=request.id, approved=approved,
                          reason=current.reason,
                          arguments=dict(approved_args) if approved_args is not None else None)

    async def _decided(self, request: ConfirmationRequest, wait_s: float
                       ) -> ConfirmationRequest | None:
        """The request once decided, waiting up to ``wait_s`` seconds (woken by the decision
        itself); None while it is still pending."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + max(0.0, wait_s)
        while True:
            fut = self.approvals.hub.waiter(request.id)
            try:
                current = await self.approvals.store.get(request.id)
                if current is None:
                    raise CallNotFound(f"request {request.id} disappeared")
                if not current.pending:
                    return current
                left = give_up - loop.time()
                if left <= 0:
                    return None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(fut, left)
            finally:
                self.approvals.hub.discard(request.id, fut)

    @staticmethod
    def _pending(call: str, facts: _Facts, request_id: str) -> CallAnswer:
        return CallAnswer(call, "pending", request_id=request_id,
                          reason=f"'{facts.tool_name}' needs a person's approval in hookgate "
                                 f"(request {request_id})")

    async def _decide(self, agent: Agent, org_id: str | None, key: str, facts: _Facts, *,
                      wait_s: float, listening: Listening | None = None,
                      counted: bool = False) -> CallAnswer:
        """PreToolUse and the gate for the call. ``counted``: a person was asked about this
        call before, so its first ask passed the rate limits (they run before the gate) and
        took its slots; asked again, it takes none."""
        run_id = facts.run_id
        ran = await self._already_ran(key, facts)
        if ran is not None:
            return ran
        stopped = await self.ledger.recorded(run_id, SESSION_STOPPED)
        if stopped is not None:
            return CallAnswer(key, "deny", reason=stopped.observation or "stopped by hookgate")
        try:
            rules = CallRules.read(agent, SECTION, default_wait_s=0.0)
        except HookBuildError as exc:
            return CallAnswer(key, "deny", reason=f"hookgate cannot apply its rules, so "
                                                  f"nothing runs: {exc}")
        identity = facts.identity(agent, org_id)
        extras = facts.extras()
        tool = facts.tool(agent, rules, facts.arguments)
        if counted:
            extras[COUNTED_KEY] = True
        try:
            args = tool.validate(facts.arguments)
        except ToolArgumentsError as exc:
            return CallAnswer(key, "deny", reason=f"hookgate: {exc}")
        # The approval's use belongs to this call id: asked again (an answer that never
        # reached the client), it is still this call's; the start claim below keeps it to
        # one execution.
        approvals = ExternalApprovals(self.approvals, self.ledger, wait_s,
                                      owner=facts.call_id)
        try:
            registry = self._registry(agent, replace(self.services, approvals=approvals))
        except HookBuildError as exc:
            return CallAnswer(key, "deny", reason=f"hookgate cannot build agent '{agent.id}''s "
                                                  f"hooks, so nothing runs: {exc}")
        decided = await decide_call(ToolCall(facts.call_id, facts.tool_name, args), tool, args,
                                    registry=registry, identity=identity, metadata=extras)
        if isinstance(decided, ToolOutcome):
            if approvals.pending is not None:
                return self._pending(key, facts, approvals.pending.id)
            return CallAnswer(key, "deny", reason=decided.observation)
        ctx, final_args, _pre = decided
        final_digest = args_digest(final_args)
        decision = None if ctx.approval is None else ctx.approval.decision
        if decision is not None:
            await decisions.keep(self.ledger, run_id, facts.call_id, facts.tool_name, final_digest,
                                 decision)
        if listening is not None and not await listening():
            # Nobody reads this answer: the call is not started, and its approval stays
            # this call's for the next ask.
            return CallAnswer(key, "pending", reason="the asker stopped waiting")
        started = "started:" + facts.call_id
        if await self.ledger.claim(run_id, started, facts.tool_name, final_digest) is not None:
            ran = await self._already_ran(key, facts)
            assert ran is not None
            return ran
        await self.ledger.finish(run_id, started, json.dumps({"arguments": final_args}),
                                 ok=False)
        return CallAnswer(key, "allow", arguments=final_args,
                          note=_note(approvals, args, final_args, ctx))

    async def _already_ran(self, key: str, facts: _Facts) -> CallAnswer | None:
        record = await self.ledger.recorded(facts.run_id, "started:" + facts.call_id)
        if record is None:
            return None
        held = _loads(record.observation)
        text = held.get("text")
        if not isinstance(text, str):
            text = ("hookgate: this call already started once and reported no result (the "
                    "agent may have stopped while the tool ran); it does not run again")
        return CallAnswer(key, "already_ran", observation=text)

    # -- after the call --------------------------------------------------------------------

    async def report(self, agents: Mapping[str, Agent], asker: Asker, call: str, *,
                     output: Any = None, error: str | None = None) -> ObservationAnswer:
        """PostToolUse over what the tool returned; the observation the model may see."""
        facts = await self._facts(call, asker)
        agent = agents.get(facts.agent_id)
        if agent is None:
            raise CallNotFound(f"call '{call}' belongs to agent '{facts.agent_id}', which "
                               "this server no longer has")
        run_id, started = facts.run_id, "started:" + facts.call_id
        record = await self.ledger.recorded(run_id, started)
        if record is None:
            raise CallRefused(f"call '{call}' was never allowed to start, so there is no "
                              "result to report")
        held = _loads(record.observation)
        if isinstance(held.get("text"), str):  # reported before: the same observation
            return ObservationAnswer(call, held["text"], bool(held.get("withheld")))
        args = held.get("arguments")
        args = args if isinstance(args, dict) else facts.arguments
        rules = CallRules.read(agent, SECTION, default_wait_s=0.0)
        extras = facts.extras()
        identity = facts.identity(agent, asker.org_id)
        tool = facts.tool(agent, rules, args)
        ctx = HookContext(
            hook_point=HookPoint.POST_TOOL_USE, tool_name=facts.tool_name, tool_args=args,
            agent_id=agent.id, user_id=facts.user_id,
            metadata={**extras, **build_metadata(identity, ToolCall(facts.call_id, facts.tool_name,
                                                                    args), tool, False)},
        )
        ctx.call_started = time.perf_counter()
        kept = await decisions.kept(self.ledger, run_id, facts.call_id, facts.tool_name,
                                    record.args_sha256 or "")
        if kept is not None:
            ctx.approval = ApprovalOutcome("approved", kept.request_id, decision=kept)
        failed = Withheld.of(str(error), shown=f"Error: tool '{facts.tool_name}' failed.") \
            if error is not None else None
        post = await observe_result(ctx, self._registry(agent, self.services),
                                    error if error is not None else output, failed)
        if post.withheld:
            text, withheld = text_of(ctx.tool_result), True
        else:
            shown = post.modified_result if post.modified_result is not None else (
                f"Error: {error}" if error is not None else output)
            notes = ctx.added_context
            text, withheld = with_hook_context(text_of(shown), list(notes)) if notes \
                else text_of(shown), False
        await self.ledger.finish(run_id, started, json.dumps(
            {"arguments": args, "text": text, "withheld": withheld}), ok=error is None)
        return ObservationAnswer(call, text, withheld)

    # -- shared ----------------------------------------------------------------------------

    async def _lineage(self, agent: Agent, user_id: str, session_id: str,
                       parent_session: str | None) -> _Lineage:
        """The session's parent and delegation depth: as recorded when the session first
        started (or was first asked about), else from ``parent_session`` and the parent's
        own record (one level below it; a parent hookgate never saw counts as top-level)."""
        key = session_run_id("gs_", "", user_id, session_id)
        record = await self.ledger.recorded(SESSIONS_RUN, key)
        if record is not None and record.observation:
            return _Lineage.of(_loads(record.observation))
        if parent_session is None or parent_session == session_id:
            lineage = _Lineage(None, 0, None)
        else:
            parent = await self.ledger.recorded(
                SESSIONS_RUN, session_run_id("gs_", "", user_id, parent_session))
            above = _Lineage.of(_loads(parent.observation if parent is not None else None))
            lineage = _Lineage(parent_session, min(above.depth + 1, MAX_DEPTH),
                               above.agent_id)
        if await self.ledger.claim(SESSIONS_RUN, key, "session", "") is None:
            await self.ledger.finish(SESSIONS_RUN, key, json.dumps(
                {"parent_session": lineage.parent_session, "depth": lineage.depth,
                 "parent_agent_id": lineage.parent_agent_id, "agent_id": agent.id}), ok=True)
            return lineage
        # Another ask recorded the session first: its record holds.
        record = await self.ledger.recorded(SESSIONS_RUN, key)
        return _Lineage.of(_loads(record.observation if record is not None else None))

    async def _facts(self, call: str, asker: Asker) -> _Facts:
        if not isinstance(call, str) or not call.startswith("gc_") or len(call) > 64:
            raise CallNotFound(f"no call '{call}'")
        record = await self.ledger.recorded(INDEX_RUN, call)
        held = _loads(record.observation if record is not None else None)
        if not held or (asker.user_id and held.get("user_id") != asker.user_id):
            # Another user's call is not theirs to see: the same answer as none at all. (An
            # empty user is the in-process guard, which sees every call of its runtime.)
            raise CallNotFound(f"no call '{call}'")
        try:
            return _Facts(**{f.name: held[f.name] for f in fields(_Facts) if f.name in held})
        except TypeError:
            raise CallNotFound(f"call '{call}' has an unreadable record") from None

    @staticmethod
    def _registry(agent: Agent, services: HookServices) -> Any:
        return build_registry(agent, services)


#: The deepest delegation a session records (deeper ones count as this deep).
MAX_DEPTH = 64


@dataclass(frozen=True, slots=True)
class _Lineage:
    """A session's place under the sessions that delegated to it."""

    parent_session: str | None
    depth: int
    parent_agent_id: str | None
    #: The agent that started the session (its sub-agents' parent agent).
    agent_id: str | None = None

    @classmethod
    def of(cls, held: Mapping[str, Any]) -> _Lineage:
        parent, depth = held.get("parent_session"), held.get("depth")
        parent_agent, agent = held.get("parent_agent_id"), held.get("agent_id")
        return cls(parent if isinstance(parent, str) else None,
                   depth if isinstance(depth, int) and 0 <= depth <= MAX_DEPTH else 0,
                   parent_agent if isinstance(parent_agent, str) else None,
                   agent if isinstance(agent, str) else None)


def _facts_text(facts: _Facts) -> str:
    return canonical_json({f.name: getattr(facts, f.name) for f in fields(_Facts)})


def _loads(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        held = json.loads(text)
    except ValueError:
        return {}
    return held if isinstance(held, dict) else {}


def _check_text(name: str, value: object, limit: int) -> None:
    if not isinstance(value, str) or not value or len(value) > limit:
        raise CallRefused(f"'{name}' must be a non-empty string of at most {limit} characters")


def _note(approvals: ExternalApprovals, asked: dict[str, Any], final: dict[str, Any],
          ctx: HookContext) -> str | None:
    parts: list[str] = []
    if approvals.by_rule is not None:
        parts.append(f"{approvals.by_rule} in hookgate")
    elif approvals.used is not None:
        used = approvals.used
        who = f" by {used.responded_by}" if used.responded_by else ""
        why = f": {used.reason}" if used.reason else ""
        parts.append(f"approved{who} in hookgate (request {used.id}){why}")
    if final != asked:
        changed = [f"{k} {asked.get(k)!r} -> {final.get(k)!r}"
                   for k in sorted(set(asked) | set(final)) if asked.get(k) != final.get(k)]
        parts.append("with edited arguments: " + ", ".join(changed))
    notes = ctx.added_context
    if notes:
        parts.extend(str(n) for n in notes)
    return "; ".join(parts) if parts else None
