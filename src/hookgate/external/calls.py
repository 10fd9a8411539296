"""The guarded-call API's codec (``/api/v1/...``, the in-process guard): sessions, asks, waits
and reports of agents that run elsewhere, turned into typed calls (external/call.py) that the
external core (external/core.py) decides; every hook, the gate, the read-only guard, rate
limits and the audit chain apply as on the engines.

Exactly once: an allowed call's start is claimed in the execution ledger (a typed
`EntryKind.STARTED` entry under the session's run) before the answer goes out, so asking
again about a call that started returns ``already_ran`` with its recorded observation; its
PostToolUse runs once, by a claim, however many reports arrive; approvals are bound to
(agent, session, call id, tool, argument digest) and used once (external/approvals.py); a
call id names one call, so re-using it with another tool or other arguments is refused.
Each call is indexed under its hookgate id (``gc_...``) for wait/report, with the org it
was asked in: every wait, peek and report checks the asker still belongs to that org.
A session started with a parent (a sub-agent's) is recorded with its delegation depth, which
every call of the session carries into the hooks' context. A call in a session that was
never started runs the session's SessionStart chain first (once).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal

from hookgate.agent import Agent
from hookgate.approvals.authority import NotActingFor, acting_for
from hookgate.approvals.edits import edit_summary
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.approvals.records import ConfirmationRequest
from hookgate.canonical import canonical_json
from hookgate.external.approvals import ExternalApprovals
from hookgate.external.call import (
    ACTING_SERVICE_KEY,
    DEFAULT_CONNECTOR,
    ExternalCall,
    build_call,
)
from hookgate.external.core import (
    Allowed,
    Denied,
    ExternalCore,
    Observed,
    OnceText,
    ReportInProgress,
    SessionState,
    SessionVerdict,
    now,
    observation_text,
)
from hookgate.external.keys import (
    BadId,
    Entry,
    EntryKind,
    checked_id,
    session_run_id,
    typed_hash,
)
from hookgate.external.policy import CallRules
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookContext
from hookgate.hooks.services import HookServices
from hookgate.tools.calls import CallIdentity
from hookgate.tools.errors import ToolArgumentsError
from hookgate.tools.tool import args_digest

if TYPE_CHECKING:
    from hookgate.storage.ledger import DatabaseLedger
    from hookgate.tools.ledger import FinishedCall, PriorExecution

#: The agent's section of rules for guarded calls (model_config_json.guarded_calls).
SECTION = "guarded_calls"
#: The run every call's index entry is kept under, by its hookgate id.
INDEX_RUN = "guarded-calls"
#: The run every session's record (its parent and delegation depth) is kept under.
SESSIONS_RUN = "guarded-sessions"
FRAMEWORKS_MAX = 64
#: Whether the asker still waits for the answer (a long-poll's client still connected).
Listening = Callable[[], Awaitable[bool]]
#: Whether the asker's token still signs in as the same user in the same org (asked at
#: every moment of use: after a wait wakes, before a call starts).
StillAllowed = Callable[[], Awaitable[bool]]
Decision = Literal["allow", "deny", "pending", "already_ran", "decided"]
_CALL_KEY = re.compile(r"gc_[0-9a-f]{40}")


class CallRefused(ValueError):
    """The request cannot be acted on (bad input, a re-used call id); the text says why."""


class CallIdReused(CallRefused):
    """A call id already named another call (another tool or other arguments)."""


class CallNotFound(LookupError):
    """No call with this id for this user."""


@dataclass(frozen=True, slots=True)
class Asker:
    """Who asks: the user, their org (as the server resolved their token for this
    request; a server's caller always has one) and the framework the agent runs on (hook
    metadata; it decides nothing). An empty user: the in-process guard, for waits and
    reports of any of its calls; no org: the in-process guard, which has none of its own."""

    user_id: str
    org_id: str | None
    framework: str
    still_allowed: StillAllowed | None = None
    #: Whom an ask or a session start acts for, as `authority.acting_for` answered for
    #: this request: the call's initiator (None: nobody, a service acting for no person).
    #: A wait, peek or report uses the initiator recorded with the call.
    initiator: str | None = None


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
    #: The org the call was asked in; only askers of that org find it.
    org_id: str | None = None
    #: Whom the call acts for (its initiator, the gate's requester); ``user_id`` asked it.
    initiator: str | None = None
    #: A sub-agent's session: the top session above it and its agent (whose facts it shares).
    root_session: str | None = None
    root_agent_id: str | None = None

    @property
    def facts_run_id(self) -> str | None:
        """The run whose session facts (request, results seen) a sub-agent's calls share."""
        if self.root_session is None:
            return None
        return session_run_id("ext-", self.root_agent_id or self.agent_id, self.user_id,
                              self.root_session,
                              None if self.initiator == self.user_id else (self.initiator,))

    @property
    def run_id(self) -> str:
        # A service's session acting for someone is a run of its own for each person (a
        # standing rule of the run, a decision, a SessionStart of one is never another's).
        return session_run_id("ext-", self.agent_id, self.user_id, self.session_id,
                              None if self.initiator == self.user_id else (self.initiator,))

    def identity(self, agent: Agent) -> CallIdentity:
        return CallIdentity(agent_id=agent.id, user_id=self.initiator,
                            org_id=agent.org_id or self.org_id, run_id=self.run_id,
                            conversation_id=self.session_id, execution_path="external",
                            require_confirmation_for_all=agent.require_confirmation_for_all,
                            parent_agent_id=self.parent_agent_id, depth=self.depth,
                            parent_session=self.parent_session,
                            facts_session=self.facts_run_id)

    def extras(self) -> dict[str, Any]:
        return {"framework": self.framework, "session_id": self.session_id,
                "parent_session": self.parent_session, "depth": self.depth,
                "parent_agent_id": self.parent_agent_id,
                ACTING_SERVICE_KEY: self.user_id if self.initiator != self.user_id else None}

    def call(self, agent: Agent, rules: CallRules, args: dict[str, Any], *,
             checked: bool) -> ExternalCall:
        """The typed call (ToolArgumentsError: ``args`` do not fit the declared types)."""
        return build_call(agent, rules, user_id=self.user_id, initiator=self.initiator,
                          org_id=self.org_id,
                          session_id=self.session_id, call_id=self.call_id,
                          run_id=self.run_id, tool_name=self.tool_name, arguments=args,
                          writes=True, connector=DEFAULT_CONNECTOR, schema=self.parameters,
                          description=self.description, metadata=self.extras(),
                          depth=self.depth, parent_session=self.parent_session,
                          parent_agent_id=self.parent_agent_id, checked=checked,
                          facts_session=self.facts_run_id)


def call_key(agent_id: str, user_id: str, session_id: str, call_id: str,
             caller_id: str | None = None) -> str:
    """The hookgate id of a call: one per agent, user, session, call id (and the service
    that asked for the user, if one did)."""
    parts = ("call", agent_id, user_id, session_id, call_id)
    return "gc_" + typed_hash(*parts, *(() if caller_id is None else (caller_id,)))


class GuardedCalls:
    """Sessions, asks, waits and reports of the external agents of one process."""

    def __init__(self, approvals: PersistentApprovals, services: HookServices,
                 ledger: DatabaseLedger) -> None:
        self.core = ExternalCore(approvals, services, ledger)
        self.approvals = approvals
        #: Each session's lineage as recorded (by its record's entry key): a session's record
        #: is written once and never changed, so an ask reads it once per process, not at
        #: every call (decision record 0037). The latest `_LINEAGES_KEPT` sessions.
        self._lineages: OrderedDict[str, _Lineage] = OrderedDict()

    # -- sessions --------------------------------------------------------------------------

    async def start_session(self, agent: Agent, asker: Asker, session_id: str,
                            parent_session: str | None = None, *,
                            request: str | None = None) -> SessionAnswer:
        """``request``: what the user asked, kept as a trusted fact of a top-level session
        (a sub-agent's task is its parent model's words, so it is not kept)."""
        _check("session_id", session_id, 256)
        if parent_session is not None:
            _check("parent_session", parent_session, 256)
        lineage = await self._lineage(agent, asker, session_id, parent_session)
        facts = self._session_facts(agent, asker, session_id, lineage)
        if request and lineage.depth == 0:
            await self.core.keep_request(agent, facts.identity(agent), request)
        verdict = await self._session_start(agent, facts)
        return SessionAnswer(session_id, verdict.context, verdict.stopped)

    @staticmethod
    def _session_facts(agent: Agent, asker: Asker, session_id: str,
                       lineage: _Lineage) -> _Facts:
        return _Facts(agent.id, asker.user_id, session_id, "", "", {}, asker.framework,
                      lineage.parent_session, depth=lineage.depth,
                      parent_agent_id=lineage.parent_agent_id, org_id=asker.org_id,
                      initiator=asker.initiator, root_session=lineage.root_session,
                      root_agent_id=lineage.root_agent_id)

    async def _session_start(self, agent: Agent, facts: _Facts) -> SessionVerdict:
        return await self.core.start_session(agent, facts.identity(agent), facts.extras())

    # -- before the call -------------------------------------------------------------------

    async def ask(self, agent: Agent, asker: Asker, *, session_id: str, call_id: str,
                  tool: str, arguments: Mapping[str, Any], parent_session: str | None = None,
                  description: str | None = None,
                  parameters: Mapping[str, Any] | None = None) -> CallAnswer:
        """PreToolUse and the gate for a new call (or the same call asked again)."""
        _check("session_id", session_id, 256)
        _check("call_id", call_id, 100)
        _check("tool", tool, 256)
        if agent.org_id is not None and agent.org_id != asker.org_id:
            raise CallNotFound(f"no agent '{agent.id}' in org '{asker.org_id}'")
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
            _check("parent_session", parent_session, 256)
        lineage = await self._lineage(agent, asker, session_id, parent_session)
        facts = _Facts(agent.id, asker.user_id, session_id, call_id, tool, dict(arguments),
                       asker.framework, lineage.parent_session, description,
                       dict(parameters) if parameters is not None else None,
                       depth=lineage.depth, parent_agent_id=lineage.parent_agent_id,
                       org_id=asker.org_id, initiator=asker.initiator,
                       root_session=lineage.root_session, root_agent_id=lineage.root_agent_id)
        key = call_key(agent.id, asker.user_id, session_id, call_id)
        index = Entry(EntryKind.INDEX, (key,))
        # Claimed with its record: a new call's index entry is one write. Whether the session
        # started and stopped and whether the call started are read with it.
        prior, state = await self.core.claim_finished_with_state(
            INDEX_RUN, index, tool, digest, _facts_text(facts), ok=True,
            session_run=facts.run_id, call_id=call_id)
        if prior is not None and prior.observation is not None and (
                _loads(prior.observation).get("initiator", facts.user_id) != facts.initiator):
            raise CallIdReused(
                f"call id '{call_id}' was already asked in session '{session_id}' acting for "
                "another person (acts_for); a call id names one call, so this one is not run")
        if prior is not None and (prior.tool_name, prior.args_sha256) != (tool, digest):
            raise CallIdReused(
                f"call id '{call_id}' was already used in session '{session_id}' for another "
                "call (another tool or other arguments); a call id names one call, so this "
                "one is not run")
        if prior is not None and prior.observation is None:
            await self.core.finish(INDEX_RUN, index, _facts_text(facts), ok=True)
        try:
            session = await self.core.session_before_call(agent, facts.identity(agent),
                                                          facts.extras(), state=state)
        except ReportInProgress:
            raise CallRefused(f"session '{session_id}' is starting; ask again") from None
        context = session.context
        counted = prior is not None and await self.approvals.store.for_call(
            facts.run_id, call_id) is not None
        answer = await self._decide(agent, asker, key, facts, wait_s=0.0, counted=counted,
                                    state=state if state.started else None)
        if context and answer.decision == "allow":
            note = f"{answer.note}; {context}" if answer.note else context
            answer = CallAnswer(answer.call, answer.decision, answer.arguments, note)
        return answer

    async def wait(self, agents: Mapping[str, Agent], asker: Asker, call: str,
                   wait_s: float, listening: Listening | None = None) -> CallAnswer:
        """The call's state, waiting up to ``wait_s`` seconds for a person's decision;
        ``listening`` says whether the asker still waits for the answer (an allow is not
        recorded as started for a long-poll its client gave up).

        While the call's request is pending, the wait is on the request alone: the
        PreToolUse chain (rate limits, audit of the attempt) runs again only once it is
        decided, not on every poll. Woken, the asker's access is checked again."""
        facts = await self._facts(call, asker)
        agent = _agent_of(agents, facts, asker, call)
        request = await self.approvals.store.for_call(facts.run_id, facts.call_id)
        if request is not None and request.pending and await self._already_ran(
                call, facts) is None:
            if await self._decided(request, wait_s) is None:
                await _still_allowed(asker, call)
                return self._pending(call, facts, request.id)
            wait_s = 0.0
        await _still_allowed(asker, call)
        return await self._decide(agent, asker, call, facts, wait_s=max(0.0, wait_s),
                                  listening=listening, counted=request is not None)

    async def peek(self, asker: Asker, call: str, wait_s: float,
                   agents: Mapping[str, Agent] | None = None) -> CallAnswer:
        """What a person decided on the call's request, waiting up to ``wait_s`` seconds,
        without starting the call or using the approval: ``pending`` while undecided, else
        ``decided`` (the call starts only when it is asked or waited on)."""
        facts = await self._facts(call, asker)
        if agents is not None:
            _agent_of(agents, facts, asker, call)
        ran = await self._already_ran(call, facts)
        if ran is not None:
            return ran
        request = await self.approvals.store.for_call(facts.run_id, facts.call_id)
        if request is None:
            raise CallRefused(f"no person was asked about call '{call}'; ask about the call "
                              "itself for its verdict")
        current = await self._decided(request, wait_s)
        await _still_allowed(asker, call)
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

    async def _decide(self, agent: Agent, asker: Asker, key: str, facts: _Facts, *,
                      wait_s: float, listening: Listening | None = None,
                      counted: bool = False, state: SessionState | None = None
                      ) -> CallAnswer:
        """PreToolUse and the gate for the call. ``counted``: a person was asked about this
        call before, so its first ask passed the rate limits (they run before the gate) and
        took its slots; asked again, it takes none. ``state``: the started session's state
        read for this ask (else its stop and the call's start are read here)."""
        ran = await self._already_ran(key, facts) if state is None else _ran(
            key, state.call_start)
        if ran is not None:
            return ran
        try:
            rules = CallRules.read(agent, SECTION, default_wait_s=0.0)
            call = facts.call(agent, rules, facts.arguments, checked=True)
        except HookBuildError as exc:
            return CallAnswer(key, "deny", reason=f"hookgate cannot apply its rules, so "
                                                  f"nothing runs: {exc}")
        except ToolArgumentsError as exc:
            return CallAnswer(key, "deny", reason=f"hookgate: {exc}")
        # The approval's use belongs to this call id: asked again (an answer that never
        # reached the client), it is still this call's; the start claim below keeps it to
        # one execution.
        verdict = await self.core.decide(call, wait_s=wait_s, owner=facts.call_id,
                                         counted=counted, session=state)
        if isinstance(verdict, Denied):
            return CallAnswer(key, "deny", reason=verdict.reason)
        if not isinstance(verdict, Allowed):
            return self._pending(key, facts, verdict.request_id)
        final_args = verdict.arguments
        if listening is not None and not await listening():
            # Nobody reads this answer: the call is not started, and its approval stays
            # this call's for the next ask.
            return CallAnswer(key, "pending", reason="the asker stopped waiting")
        await _still_allowed(asker, key)
        await self._still_acting(asker, facts, key)
        if await self.core.claim_start(call, final_args, lambda: json.dumps(
                {"arguments": final_args})) is not None:
            ran = await self._already_ran(key, facts)
            assert ran is not None
            return ran
        return CallAnswer(key, "allow", arguments=final_args,
                          note=_note(verdict.approvals, call.arguments, final_args,
                                     verdict.ctx))

    async def _already_ran(self, key: str, facts: _Facts) -> CallAnswer | None:
        return _ran(key, await self.core.started(facts.run_id, facts.call_id))

    # -- after the call --------------------------------------------------------------------

    async def report(self, agents: Mapping[str, Agent], asker: Asker, call: str, *,
                     output: Any = None, error: str | None = None) -> ObservationAnswer:
        """PostToolUse over what the tool returned, once per call (a second report, on
        any instance, answers the first one's observation)."""
        facts = await self._facts(call, asker)
        agent = _agent_of(agents, facts, asker, call)
        # Its start record and the decision kept before it started: one read.
        records = await self.core.call_records(facts.run_id, facts.call_id)
        record = records.start
        if record is None:
            raise CallRefused(f"call '{call}' was never allowed to start, so there is no "
                              "result to report")
        held = _loads(record.observation)
        if isinstance(held.get("text"), str):  # reported before: the same observation
            return ObservationAnswer(call, held["text"], bool(held.get("withheld")))
        args = held.get("arguments")
        args = args if isinstance(args, dict) else facts.arguments
        try:
            rules = CallRules.read(agent, SECTION, default_wait_s=0.0)
        except HookBuildError:
            rules = CallRules()
        typed = facts.call(agent, rules, args, checked=False)
        await _still_allowed(asker, call)
        await self._still_acting(asker, facts, call)

        def kept_of(observed: Observed) -> str:
            text, withheld = observation_text(observed, output, error)
            return json.dumps({"arguments": args, "text": text, "withheld": withheld})

        def started_finish(kept: str) -> FinishedCall:
            return self.core.started_finish(facts.run_id, facts.call_id, kept,
                                            ok=error is None)

        def finishing(observed: Observed) -> list[FinishedCall]:
            # The start's record and the report's (start first), with the result's fact.
            kept = kept_of(observed)
            return [started_finish(kept), self.core.report_finish(typed, kept)]

        async def post_tool_use() -> OnceText:
            observed = await self.core.observe(typed, result=output, error=error,
                                               started_at=now(),
                                               digest=record.args_sha256 or "",
                                               records=records, finishing=finishing)
            kept = kept_of(observed)
            # The start's record and the report's, in one write (start first): the
            # result's fact's, where that one carried them.
            return OnceText(kept, (started_finish(kept),), written=observed.finished)

        try:
            kept = _loads(await self.core.once(typed, post_tool_use))
        except ReportInProgress as exc:
            raise CallRefused(str(exc)) from None
        return ObservationAnswer(call, str(kept.get("text", "")), bool(kept.get("withheld")))

    # -- shared ----------------------------------------------------------------------------

    async def _lineage(self, agent: Agent, asker: Asker, session_id: str,
                       parent_session: str | None) -> _Lineage:
        """The session's parent and delegation depth: as recorded when the session first
        started (or was first asked about), else from ``parent_session`` and the parent's
        own record (one level below it; a parent hookgate never saw counts as top-level)."""
        entry = _session_entry(asker, session_id)
        key = entry.key
        kept = self._lineages.get(key)
        if kept is not None:
            self._lineages.move_to_end(key)
            return kept
        record = await self.core.recorded(SESSIONS_RUN, entry)
        if record is not None and record.observation:
            return self._keep_lineage(key, _Lineage.of(_loads(record.observation)))
        if parent_session is None or parent_session == session_id:
            lineage = _Lineage(None, 0, None)
        else:
            parent = await self.core.recorded(
                SESSIONS_RUN, _session_entry(asker, parent_session))
            above = _Lineage.of(_loads(parent.observation if parent is not None else None))
            lineage = _Lineage(parent_session, min(above.depth + 1, MAX_DEPTH),
                               above.agent_id, None, above.root_session or parent_session,
                               above.root_agent_id or above.agent_id or agent.id)
        if await self.core.record_once(SESSIONS_RUN, entry, "session", json.dumps(
                {"parent_session": lineage.parent_session, "depth": lineage.depth,
                 "parent_agent_id": lineage.parent_agent_id, "agent_id": agent.id,
                 "root_session": lineage.root_session,
                 "root_agent_id": lineage.root_agent_id}), ok=True):
            return self._keep_lineage(key, lineage)
        # Another ask recorded the session first: its record holds.
        record = await self.core.recorded(SESSIONS_RUN, entry)
        if record is None or not record.observation:
            return _Lineage.of({})
        return self._keep_lineage(key, _Lineage.of(_loads(record.observation)))

    def _keep_lineage(self, key: str, lineage: _Lineage) -> _Lineage:
        """``lineage`` as the session's record says it, kept for the next asks."""
        self._lineages[key] = lineage
        if len(self._lineages) > _LINEAGES_KEPT:
            self._lineages.popitem(last=False)
        return lineage

    async def _facts(self, call: str, asker: Asker) -> _Facts:
        if not isinstance(call, str) or _CALL_KEY.fullmatch(call) is None:
            raise CallNotFound(f"no call '{call}'")
        record = await self.core.recorded(INDEX_RUN, Entry(EntryKind.INDEX, (call,)))
        held = _loads(record.observation if record is not None else None)
        owner = held.get("caller_id") or held.get("user_id")
        if not held or (asker.user_id and owner != asker.user_id) or (
                asker.org_id is not None and held.get("org_id") != asker.org_id):
            # Another user's call, or one of an org the asker no longer belongs to, is not
            # theirs to see: the same answer as none at all. (An empty user is the
            # in-process guard, which sees every call of its runtime.)
            raise CallNotFound(f"no call '{call}'")
        # A call recorded before calls carried an initiator acted for its own user.
        held.setdefault("initiator", held.get("user_id"))
        try:
            facts = _Facts(**{name: held[name] for name in _FACT_FIELDS if name in held})
        except TypeError:
            raise CallNotFound(f"call '{call}' has an unreadable record") from None
        await self._still_acting(asker, facts, call)
        return facts

    async def _still_acting(self, asker: Asker, facts: _Facts, call: str) -> None:
        """At every moment of use (wait, peek, start, report): the asker may still act for
        the person the call acts for (approvals/authority.py's `acting_for`); else no such
        call for them. A call the asker made for themself needs no such check."""
        if facts.initiator in (None, facts.user_id) or asker.org_id is None:
            return
        try:
            # Only a service identity acts for someone else (checked when it asked).
            await acting_for(self.approvals.db, asker.user_id, asker.org_id, True,
                             facts.initiator)
        except NotActingFor as exc:
            raise CallNotFound(f"no call '{call}' (the asker no longer acts for "
                               f"'{facts.initiator}': {exc})") from None


def _agent_of(agents: Mapping[str, Agent], facts: _Facts, asker: Asker, call: str) -> Agent:
    """The call's agent, if the asker's org still has it (else: no such call for them)."""
    agent = agents.get(facts.agent_id)
    if agent is None:
        raise CallNotFound(f"call '{call}' belongs to agent '{facts.agent_id}', which "
                           "this server no longer has")
    if asker.org_id is not None and agent.org_id is not None and agent.org_id != asker.org_id:
        raise CallNotFound(f"no call '{call}'")
    return agent


def _ran(key: str, record: PriorExecution | None) -> CallAnswer | None:
    """``already_ran`` with the recorded observation, for a call with a start record."""
    if record is None:
        return None
    text = _loads(record.observation).get("text")
    if not isinstance(text, str):
        text = ("hookgate: this call already started once and reported no result (the "
                "agent may have stopped while the tool ran); it does not run again")
    return CallAnswer(key, "already_ran", observation=text)


async def _still_allowed(asker: Asker, call: str) -> None:
    """At the moment of use: the asker's token still signs in as the same user in the same
    org (a failed check counts as no)."""
    if asker.still_allowed is None:
        return
    try:
        allowed = await asker.still_allowed()
    except Exception:
        allowed = False
    if not allowed:
        raise CallNotFound(f"no call '{call}' (the asker's access changed)")


#: The deepest delegation a session records (deeper ones count as this deep).
MAX_DEPTH = 64
#: How many sessions' lineages a process keeps (`GuardedCalls._lineages`).
_LINEAGES_KEPT = 4096


@dataclass(frozen=True, slots=True)
class _Lineage:
    """A session's place under the sessions that delegated to it."""

    parent_session: str | None
    depth: int
    parent_agent_id: str | None
    #: The agent that started the session (its sub-agents' parent agent).
    agent_id: str | None = None
    #: The top session above a sub-agent's, and its agent: their session facts are shared.
    root_session: str | None = None
    root_agent_id: str | None = None

    @classmethod
    def of(cls, held: Mapping[str, Any]) -> _Lineage:
        parent, depth = held.get("parent_session"), held.get("depth")
        parent_agent, agent = held.get("parent_agent_id"), held.get("agent_id")
        root, root_agent = held.get("root_session"), held.get("root_agent_id")
        return cls(parent if isinstance(parent, str) else None,
                   depth if isinstance(depth, int) and 0 <= depth <= MAX_DEPTH else 0,
                   parent_agent if isinstance(parent_agent, str) else None,
                   agent if isinstance(agent, str) else None,
                   root if isinstance(root, str) else None,
                   root_agent if isinstance(root_agent, str) else None)


def _session_entry(asker: Asker, session_id: str) -> Entry:
    """Where a session's record (its parent, its depth) is kept for this asker."""
    return Entry(EntryKind.SESSION, (asker.user_id, session_id))


#: The fields of `_Facts`, in order (the index record's keys).
_FACT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(_Facts))


def _facts_text(facts: _Facts) -> str:
    return canonical_json({name: getattr(facts, name) for name in _FACT_FIELDS})


def _loads(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        held = json.loads(text)
    except ValueError:
        return {}
    return held if isinstance(held, dict) else {}


def _check(name: str, value: object, limit: int) -> None:
    try:
        checked_id(name, value, limit)
    except BadId as exc:
        raise CallRefused(str(exc)) from None


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
    # Masked: the model never reads a secret's value. The very arguments it asked with
    # (no hook or person gave others) changed in nothing.
    edited = None if final is asked else edit_summary(asked, final)
    if edited is not None:
        parts.append("with edited arguments: " + edited)
    notes = ctx.added_context
    if notes:
        parts.extend(str(n) for n in notes)
    return "; ".join(parts) if parts else None
