"""The external core: the one flow of a call that runs outside hookgate, whoever asks (the
guarded-call API, a Claude Code hook). SessionStart; PreToolUse, the read-only guard, rate
limits and the gate through `decide_call` (tools/guarded.py) for the typed `ExternalCall`;
the decision kept for the audit row; the start claimed once; PostToolUse through
`observe_result`, run once per call by a claim. The codecs (external/calls.py,
claude_code/backend.py) only turn their wire format into these calls and verdicts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hookgate.agent import Agent
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.approvals.rules import kept_shadow
from hookgate.catalog.build import build_registry
from hookgate.catalog.builtin.rate_limit import COUNTED_KEY
from hookgate.external import decisions
from hookgate.external.approvals import ExternalApprovals
from hookgate.external.call import ExternalCall, tool_call
from hookgate.external.keys import Entry, EntryKind
from hookgate.hooks.approval import ApprovalOutcome
from hookgate.hooks.coverage import RetryReuse
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookContext, HookPoint
from hookgate.hooks.registry import HookRegistry
from hookgate.hooks.services import HookServices
from hookgate.hooks.trace import ChainResult
from hookgate.hooks.withheld import Withheld
from hookgate.policies.shadow import record_shadow
from hookgate.provenance import Fact, facts_session
from hookgate.storage.ledger import DatabaseLedger
from hookgate.storage.session_facts import DatabaseFacts
from hookgate.tools.calls import CallIdentity, ToolOutcome
from hookgate.tools.guarded import (
    build_metadata,
    decide_call,
    observe_result,
    render_observation,
    with_hook_context,
)
from hookgate.tools.ledger import FinishedCall, PriorExecution
from hookgate.tools.tool import args_digest

__all__ = ["Allowed", "CallRecords", "Denied", "ExternalCore", "Finishing", "Observed",
           "OnceText", "SessionState", "SessionVerdict", "Verdict", "Waiting"]

#: A session whose SessionStart chain ran (explicitly, or before its first call).
_STARTED_SESSION = Entry(EntryKind.SESSION, ("started",))
#: A session its SessionStart chain stopped (the reason is the record).
_STOPPED = Entry(EntryKind.STOPPED)
#: The claim of the SessionStart run before a never-started session's first call.
_IMPLICIT_START = Entry(EntryKind.SESSION, ("implicit-start",))
#: How long a second report of a call waits for the first one's observation.
REPORT_SETTLES_S = 30.0
_REREAD_S = 0.02

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Allowed:
    """The call may run with ``arguments`` (rewritten by a hook or edited by a person)."""

    ctx: HookContext
    arguments: dict[str, Any]
    #: A hook or a person changed the arguments.
    rewritten: bool
    approvals: ExternalApprovals

    def approved_by(self) -> str | None:
        """Who let the call run (a person's approval, a standing rule), in the words an
        agent's allow gives; None when nobody had to."""
        if self.approvals.by_rule is not None:
            return f"{self.approvals.by_rule} in hookgate"
        used = self.approvals.used
        if used is None:
            return None
        who = f" by {used.responded_by}" if used.responded_by else ""
        why = f": {used.reason}" if used.reason else ""
        return f"approved{who} in hookgate (request {used.id}){why}"


@dataclass(frozen=True, slots=True)
class Denied:
    reason: str


@dataclass(frozen=True, slots=True)
class Waiting:
    """A person decides request ``request_id`` first."""

    request_id: str


Verdict = Allowed | Denied | Waiting


@dataclass(frozen=True, slots=True)
class SessionVerdict:
    #: Why the SessionStart chain stopped the session (None: it goes on).
    stopped: str | None
    context: str | None


@dataclass(frozen=True, slots=True)
class Observed:
    """PostToolUse's result over what a call returned."""

    ctx: HookContext
    post: ChainResult
    #: The ledger records written with the result's fact, in its write (`observe`'s
    #: ``finishing``); empty when none were.
    finished: tuple[FinishedCall, ...] = ()


#: The ledger records a call's observation finishes (they say what the model reads of it).
Finishing = Callable[[Observed], Sequence[FinishedCall]]


@dataclass(frozen=True, slots=True)
class OnceText:
    """What work run once answered, with the ledger records it finished (``along``): they
    are written with the claim's record, in one write, before it (decision record 0020).
    ``written``: the records the work wrote itself, with its last write (decision record
    0031); when they are those, the claim's included, nothing is written again."""

    text: str
    along: tuple[FinishedCall, ...] = ()
    written: tuple[FinishedCall, ...] = ()


@dataclass(frozen=True, slots=True)
class SessionState:
    """What the ledger held, at one read, of a session and one call of it: whether its
    SessionStart ran, why it stopped the session, and the call's start record. Once the
    session started, its stop is final (recorded before its start), and a start another
    ask of the call makes after the read is found by this ask's own start claim: an ask
    decides on this state."""

    started: bool
    stopped: str | None
    call_start: PriorExecution | None


@dataclass(frozen=True, slots=True)
class CallRecords:
    """A started call's records at one read: its start record (its final arguments, then
    its observation) and the decision kept for it (written before its start)."""

    start: PriorExecution | None
    decision: PriorExecution | None


class ReportInProgress(RuntimeError):
    """Another request claimed work that runs once (a call's PostToolUse, a session's first
    SessionStart) and has not finished it within `REPORT_SETTLES_S`."""


class ExternalCore:
    """The external flow over one process's approvals, hook services and ledger."""

    def __init__(self, approvals: PersistentApprovals, services: HookServices,
                 ledger: DatabaseLedger) -> None:
        self.approvals = approvals
        self.services = services
        self.ledger = ledger

    def registry(self, agent: Agent, services: HookServices | None = None) -> HookRegistry:
        """The agent's hooks (HookBuildError says what is wrong with them). Without
        ``services`` (a call's approvals): with this process's own, built again only when
        something made per call is in them (decision record 0037)."""
        if services is None:
            return build_registry(agent, self.services, again=True)
        return build_registry(agent, services)

    # -- sessions ---------------------------------------------------------------------------

    async def start_session(self, agent: Agent, identity: CallIdentity,
                            metadata: Mapping[str, Any]) -> SessionVerdict:
        """The SessionStart chain; a stop is recorded, so the session's calls are refused,
        and the session counts as started."""
        facts = {"conversation_id": identity.conversation_id, **metadata,
                 "org_id": identity.org_id, "run_id": identity.run_id,
                 "execution_path": "external", "parent_agent_id": identity.parent_agent_id,
                 "depth": identity.depth}
        ctx = HookContext(hook_point=HookPoint.SESSION_START, agent_id=agent.id,
                          user_id=identity.user_id, metadata=facts)
        result = await self.registry(agent).run_session_start(ctx)
        stopped = None
        if not result.allow:
            stopped = f"hookgate stopped the session at SessionStart: {result.error or 'a hook'}"
            await self.record_once(identity.run_id, _STOPPED, "SessionStart", stopped,
                                   ok=False)
        await self.record_once(identity.run_id, _STARTED_SESSION, "SessionStart", "started",
                               ok=True)
        return SessionVerdict(stopped, None if stopped else result.additional_context or None)

    async def claim_finished_with_state(self, run_id: str, entry: Entry, what: str,
                                        digest: str, text: str, *, ok: bool, session_run: str,
                                        call_id: str
                                        ) -> tuple[PriorExecution | None, SessionState]:
        """`claim_finished`, with the `SessionState` of ``session_run`` (whether the session
        started and stopped, and whether ``call_id`` started) read in the same statement
        where the backend can (decision record 0047)."""
        keys = _state_keys(call_id)
        prior, held = await self.ledger.claim_finished_reading(
            run_id, entry.key, what, digest, text, ok, session_run, keys)
        return prior, _session_state(held, keys)

    async def session_before_call(self, agent: Agent, identity: CallIdentity,
                                  metadata: Mapping[str, Any], *,
                                  state: SessionState | None = None) -> SessionVerdict:
        """The session rule: a call (or prompt) of a session that was never started runs
        the session's SessionStart chain first, once (concurrent first calls wait for that
        one); a started session's calls run none. The verdict of that run (or an empty one).
        ``state``: the session's, read for this call (`claim_finished_with_state`)."""
        if state is not None and state.started:
            return SessionVerdict(None, None)
        if await self.recorded(identity.run_id, _STARTED_SESSION) is not None:
            return SessionVerdict(None, None)

        async def run() -> str:
            verdict = await self.start_session(agent, identity, metadata)
            return json.dumps({"stopped": verdict.stopped, "context": verdict.context})
        held = json.loads(await self.once_entry(identity.run_id, _IMPLICIT_START, run))
        stopped, context = held.get("stopped"), held.get("context")
        return SessionVerdict(stopped if isinstance(stopped, str) else None,
                              context if isinstance(context, str) else None)

    async def keep_request(self, agent: Agent, identity: CallIdentity, text: str) -> None:
        """Keep what the user asked as a trusted fact of the session (hookgate.provenance);
        HookBuildError: the agent's hooks cannot be built."""
        await self.registry(agent).facts.add(facts_session(identity), Fact.request(text))

    async def stopped(self, run_id: str) -> str | None:
        """Why the session's SessionStart stopped it, or None."""
        record = await self.ledger.recorded(run_id, _STOPPED.key)
        return None if record is None else _stop_reason(record)

    # -- before the call --------------------------------------------------------------------

    async def decide(self, call: ExternalCall, *, wait_s: float, owner: str | None = None,
                     counted: bool = False, retry: RetryReuse | None = None,
                     session: SessionState | None = None) -> Verdict:
        """PreToolUse, the read-only guard, rate limits and the gate for ``call``.
        ``owner``: the call id that owns an approval's use (see ExternalApprovals);
        ``counted``: the call took its rate-limit slots when it was first asked;
        ``retry``: the one exception to "an approval covers its own call id", for a codec
        whose client re-sends a call it gave up waiting for (hookgate.hooks.coverage);
        ``session``: the session's state read for this ask (`claim_finished_with_state`),
        whose stop is final once the session started (else the stop is read here)."""
        stopped = session.stopped if session is not None and session.started else (
            await self.stopped(call.run_id))
        if stopped is not None:
            return Denied(stopped)
        approvals = ExternalApprovals(self.approvals, self.ledger, wait_s, owner=owner,
                                      retry=retry)
        try:
            registry = self.registry(call.agent, replace(self.services, approvals=approvals))
        except HookBuildError as exc:
            return Denied(f"hookgate cannot build agent '{call.agent.id}''s hooks, so nothing "
                          f"runs: {exc}")
        guarded = call.call.with_facts({COUNTED_KEY: True}) if counted else call.call
        decided = await decide_call(guarded, registry=registry)
        if isinstance(decided, ToolOutcome):
            # The gate's StillPending is a hook failure to the registry (the call is
            # blocked, observers record the attempt); the verdict says what it waits for.
            if approvals.pending is not None:
                return Waiting(approvals.pending.id)
            return Denied(decided.observation)
        ctx, final_args, pre = decided
        decision = None if ctx.approval is None else ctx.approval.decision
        if decision is not None:
            # For the audit row written when the call's result is reported at PostToolUse.
            await decisions.keep(self.ledger, call.run_id, call.call_id, call.tool.name,
                                 args_digest(final_args), decision)
        rewritten = pre.modified_args is not None or final_args != call.arguments
        return Allowed(ctx, final_args, rewritten, approvals)

    async def claim_start(self, call: ExternalCall, arguments: dict[str, Any],
                          started: Callable[[], str]) -> PriorExecution | None:
        """Claim the call's one start (None: this ask has it, and ``started()`` is
        recorded); else the earlier start's record."""
        entry = Entry(EntryKind.STARTED, (call.call_id,))
        return await self.ledger.claim_finished(call.run_id, entry.key, call.tool.name,
                                                args_digest(arguments), started(), ok=False)

    async def started(self, run_id: str, call_id: str) -> PriorExecution | None:
        """The call's start record (its arguments, then its observation), or None."""
        return await self.ledger.recorded(run_id, Entry(EntryKind.STARTED, (call_id,)).key)

    async def call_records(self, run_id: str, call_id: str) -> CallRecords:
        """The call's start record and its kept decision, in one read."""
        start = Entry(EntryKind.STARTED, (call_id,)).key
        decision = decisions.key(call_id)
        held = await self.ledger.recorded_among(run_id, (start, decision))
        return CallRecords(held.get(start), held.get(decision))

    @staticmethod
    def started_finish(run_id: str, call_id: str, text: str, ok: bool) -> FinishedCall:
        """The finish of the call's start record with its observation (for `OnceText`)."""
        return FinishedCall(run_id, Entry(EntryKind.STARTED, (call_id,)).key, text, ok)

    # -- after the call ---------------------------------------------------------------------

    async def observe(self, call: ExternalCall, *, result: Any, error: str | None,
                      started_at: float, digest: str | None,
                      records: CallRecords | None = None,
                      finishing: Finishing | None = None) -> Observed:
        """PostToolUse over what the tool returned (``error``: it failed), with the
        decision kept for this exact call (``digest``: its final arguments'; ``records``:
        the call's records read after it started, which hold it, else it is read here).
        ``finishing``: the ledger records the observation finishes, written with the
        result's fact in one write when the facts are kept in the ledger's database
        (`Observed.finished` says which were)."""
        args = call.arguments
        ctx = HookContext(
            hook_point=HookPoint.POST_TOOL_USE, tool_name=call.tool.name, tool_args=args,
            agent_id=call.agent.id, user_id=call.initiator,
            metadata={**call.metadata, **build_metadata(call.identity, tool_call(call, args),
                                                        call.tool, False)},
        )
        ctx.call_started = started_at
        if call.call.shadow is not None:
            call.call.shadow(ctx, counted=False)  # for the audit row of the result
        kept = None if digest is None else (
            decisions.kept_in(records.decision, call.tool.name, digest) if records is not None
            else await decisions.kept(self.ledger, call.run_id, call.call_id, call.tool.name,
                                      digest))
        if kept is not None:
            ctx.approval = ApprovalOutcome("approved", kept.request_id, decision=kept)
            await self._shadow_rules_kept(ctx, kept.request_id)
        failed = Withheld.of(str(error), shown=f"Error: tool '{call.tool.name}' failed.") \
            if error is not None else None
        registry = self.registry(call.agent)
        written: list[tuple[FinishedCall, ...]] = []
        keep = None
        store = registry.facts
        if finishing is not None and isinstance(store, DatabaseFacts) and (
                store.db is self.ledger.db):
            async def keep(session: str, fact: Fact, post: ChainResult) -> None:
                # Called once the chain let the model read the result: the records say
                # what it reads, and they are kept only if the fact is (one write).
                finishes = tuple(finishing(Observed(ctx, post)))
                await store.add_finishing(session, fact, finishes)
                written.append(finishes)
        post = await observe_result(ctx, registry, error if error is not None else result,
                                    failed, keep)
        return Observed(ctx, post, written[0] if written and not post.withheld else ())

    async def _shadow_rules_kept(self, ctx: HookContext, request_id: str | None) -> None:
        # The standing rules in shadow mode its request kept (counted when it was asked),
        # for the audit row of the result. Never fails the report.
        if request_id is None:
            return
        try:
            request = await self.approvals.store.get(request_id)
        except Exception:
            log.exception("the shadow rules of request %s could not be read", request_id)
            return
        if request is not None:
            record_shadow(ctx, kept_shadow(request.context), counted=False)

    async def once(self, call: ExternalCall, work: Callable[[], Awaitable[str | OnceText]],
                   *, report: str = "") -> str:
        """``work``'s text, run once per call however many reports arrive on however many
        instances: the first claims the call's report and records the text; every other
        answers the recorded text (ReportInProgress: it never came). ``report``: what
        names one report of the call where a caller may send several different ones (a
        Claude Code PostToolUse carries the output, and another output is another report
        whose PostToolUse must run)."""
        return await self.once_entry(call.run_id, _report_entry(call, report), work)

    @staticmethod
    def report_finish(call: ExternalCall, text: str, report: str = "") -> FinishedCall:
        """The finish of the call's report claim (`once`) with its text."""
        return FinishedCall(call.run_id, _report_entry(call, report).key, text, True)

    async def once_entry(self, run_id: str, entry: Entry,
                         work: Callable[[], Awaitable[str | OnceText]]) -> str:
        """``work``'s text, run by the first to claim ``entry``; the others read it. The
        records ``work`` finished along (`OnceText`) are written first, in the same write."""
        prior = await self.ledger.claim(run_id, entry.key, entry.kind.value, "")
        if prior is None:
            done = await work()
            text, along, written = (done, (), ()) if isinstance(done, str) else (
                done.text, done.along, done.written)
            finishes = (*along, FinishedCall(run_id, entry.key, text, True))
            if written == finishes:
                return text  # the work wrote them, with its last write
            if along:
                await self.ledger.finish_all(finishes)
            else:
                await self.ledger.finish(run_id, entry.key, text, ok=True)
            return text
        loop = asyncio.get_running_loop()
        give_up = loop.time() + REPORT_SETTLES_S
        while prior is not None and prior.observation is None and loop.time() < give_up:
            await asyncio.sleep(_REREAD_S)
            prior = await self.ledger.recorded(run_id, entry.key)
        if prior is None or prior.observation is None:
            raise ReportInProgress(f"another request is running the {entry.kind.value} "
                                   "hooks of this call and has not finished; ask again")
        return prior.observation

    # -- shared -----------------------------------------------------------------------------

    async def record_once(self, run_id: str, entry: Entry, what: str, text: str, *,
                          ok: bool) -> bool:
        """Record ``text`` under ``entry`` unless it was recorded before (True: now)."""
        return await self.ledger.claim_finished(run_id, entry.key, what, "", text, ok) is None

    async def recorded(self, run_id: str, entry: Entry) -> PriorExecution | None:
        return await self.ledger.recorded(run_id, entry.key)

    async def claim(self, run_id: str, entry: Entry, what: str,
                    digest: str) -> PriorExecution | None:
        return await self.ledger.claim(run_id, entry.key, what, digest)

    async def claim_finished(self, run_id: str, entry: Entry, what: str, digest: str,
                             text: str, *, ok: bool) -> PriorExecution | None:
        """`claim` and `finish` in one write, for a record known when it is claimed."""
        return await self.ledger.claim_finished(run_id, entry.key, what, digest, text, ok)

    async def finish(self, run_id: str, entry: Entry, text: str, *, ok: bool) -> None:
        await self.ledger.finish(run_id, entry.key, text, ok=ok)


def observation_text(observed: Observed, output: Any, error: str | None) -> tuple[str, bool]:
    """The text the model may see of a reported result, and whether it is withheld."""
    ctx, post = observed.ctx, observed.post
    if post.withheld:
        return render_observation(ctx.tool_result), True
    shown = post.modified_result if post.modified_result is not None else (
        f"Error: {error}" if error is not None else output)
    notes = ctx.added_context
    text = render_observation(shown)
    return (with_hook_context(text, list(notes)) if notes else text), False


def _state_keys(call_id: str) -> tuple[str, str, str]:
    """The ledger keys of a session's start and stop and of the call's start."""
    return _STARTED_SESSION.key, _STOPPED.key, Entry(EntryKind.STARTED, (call_id,)).key


def _session_state(held: Mapping[str, PriorExecution], keys: tuple[str, str, str]
                   ) -> SessionState:
    started, stopped_key, start = keys
    stopped = held.get(stopped_key)
    return SessionState(started in held, None if stopped is None else _stop_reason(stopped),
                        held.get(start))


def _report_entry(call: ExternalCall, report: str) -> Entry:
    return Entry(EntryKind.REPORT, (call.call_id, report))


def _stop_reason(record: PriorExecution) -> str:
    return record.observation or "stopped by hookgate"


def now() -> float:
    """The clock a call's duration is measured on (``HookContext.call_started``)."""
    return time.perf_counter()
