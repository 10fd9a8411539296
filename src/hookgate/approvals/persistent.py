"""`PersistentApprovals`: the approval state machine over the database.

A request is a row before anyone is asked. Waiting is a future (no polling), or, for a run
on the run queue, parking: the run is checkpointed and its job ends. Deciding is a
compare-and-set from ``pending`` followed by a wake-up (``after_transition`` commits with
it); expiry is the same compare-and-set to ``expired``. Runs interrupted by a restart find
their request again by (run, tool call).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from hookgate.approvals import authority, delivery_claims
from hookgate.approvals.card_text import card_args, card_numbers, card_reasons
from hookgate.approvals.context import approval_context
from hookgate.approvals.continuations import RunContinuations
from hookgate.approvals.delivery_claims import UNDELIVERED, card_delivered, is_delivery_claim
from hookgate.approvals.edits import checked_edit
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.errors import (
    AlreadyDecided,
    EditNeedsMore,
    InvalidEdit,
    NotEligible,
    RequestNotFound,
)
from hookgate.approvals.escalation_store import EscalationStore
from hookgate.approvals.quorum import QuorumVotes, already_voted, final_vote
from hookgate.approvals.reachability import DELIVERY_FAILED, DELIVERY_FAILED_CAUSE, flag_unreachable
from hookgate.approvals.records import ConfirmationRequest
from hookgate.approvals.routing import ChannelDirectory, route, routed_channels, routed_context
from hookgate.approvals.rules import (
    SHADOW_KEY,
    RuleBook,
    StandingRule,
    recorded_again,
    stored_shadow,
)
from hookgate.approvals.service import ApprovalAsk, ApprovalDecision
from hookgate.approvals.store import AfterTransition, ConfirmationStore
from hookgate.approvals.waiters import WaiterHub
from hookgate.channels.base import (
    ApprovalCard,
    CardOutcome,
    Channel,
    DeliveredCard,
    DeliveryError,
)
from hookgate.engines.interrupts import RunParked
from hookgate.escalation_policy import EscalationPolicy
from hookgate.hooks.coverage import RetryReuse, coverage
from hookgate.storage.approval_votes import VoteExists
from hookgate.storage.database import Database
from hookgate.storage.transaction import Transaction
from hookgate.telemetry.approvals import timed_wait
from hookgate.tools.tool import Tool

if TYPE_CHECKING:
    from hookgate.agent import Agent
    from hookgate.approvals.escalation import Escalations

log = logging.getLogger(__name__)

Listener = Callable[[ConfirmationRequest], None]
#: The tool a request is for, with the schema an edit is checked against (None: unknown).
ToolOf = Callable[[ConfirmationRequest], Tool | None]
#: The agent a request is for, as configured now (None: unknown here).
AgentOf = Callable[[ConfirmationRequest], "Agent | None"]


class ApprovalDeliveryFailed(Exception):
    """The approval card could not be delivered; the request was cancelled."""


class StillPending(Exception):
    """No decision came within the caller's wait; the request stays pending (``request``)."""

    def __init__(self, request: ConfirmationRequest) -> None:
        super().__init__(f"request {request.id} is still pending")
        self.request = request


class PersistentApprovals:
    """Creates, delivers, waits for and decides confirmation requests."""

    def __init__(
        self,
        db: Database,
        *,
        channels: ChannelDirectory | None = None,
        inbox_url: Callable[[str], str | None] | None = None,
        sweep_interval: float = 2.0,
        expiry_interval: float = 30.0,
        tool_of: ToolOf | None = None,
        agent_of: AgentOf | None = None,
        escalations: Callable[[PersistentApprovals], Escalations] | None = None,
        continuations: RunContinuations | None = None,
    ) -> None:
        """``tool_of`` gives the tool an edit is checked against; ``agent_of`` the agent a
        request's requirement is read from now (default: the agents this process asked
        for); ``escalations`` builds the reminders and escalation of new requests;
        ``continuations`` is where the run queue, when there is one, registers to continue
        parked runs (approvals/continuations.py)."""
        self.db = db
        self.store = ConfirmationStore(db)
        #: Standing rules ("approve and remember"), consulted before a request is made.
        self.rules = RuleBook(db)
        self.votes = QuorumVotes(db)
        self.hub = WaiterHub()
        self.channels = channels
        self.inbox_url = inbox_url or (lambda _id: None)
        self.sweep_interval = sweep_interval
        self.expiry_interval = expiry_interval
        self.tool_of: ToolOf = tool_of or (lambda _request: None)
        #: Agents this process asked for (what an edit's requirement is read against when
        #: no ``agent_of`` is set); a server sets ``agent_of`` from its configuration.
        self._agents_seen: dict[str, Agent] = {}
        self.agent_of: AgentOf = agent_of or (
            lambda request: self._agents_seen.get(request.agent_id))
        self._listeners: list[Listener] = []
        #: Announcers to other instances: (in the change's transaction, after it alone).
        self._announcers: list[tuple[AfterTransition, Listener]] = []
        self._shutting_down = False
        self._background: set[asyncio.Task[Any]] = set()
        self._expiry_task: asyncio.Task[None] | None = None
        #: The run queue's continuation of parked runs (PostgreSQL): it runs inside the
        #: transaction of every status change, and says whether a waiting call parks.
        self.continuations = continuations or RunContinuations()
        #: Reminders, escalation and reachability of new requests (a server's).
        self.escalations: Escalations | None = (
            escalations(self) if escalations is not None else None)

    def _after_transition(self) -> AfterTransition | None:
        c = self.continuations
        return c.after_transition if c.registered else None

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        self._shutting_down = False
        await self.expire_overdue()
        self.hub.start_sweep(self.store.decided_since, self.sweep_interval)
        if self._expiry_task is None:
            self._expiry_task = asyncio.create_task(self._expire_loop())

    def can_edit(self, request: ConfirmationRequest) -> bool:
        """Whether "approve with edited arguments" can succeed for ``request``: only for a
        tool the agent declares, whose schema an edit is checked against (approvals/edits.py).
        The one answer the inbox, the CLI (through the API's ``can_edit``) and the chat cards
        use: a Claude Code or MCP call offers approve and reject only."""
        return self.tool_of(request) is not None

    def begin_shutdown(self) -> None:
        """From now on, a waiting call that is cancelled leaves its request pending: the
        process is stopping, and the run resumes from its checkpoint on the next start."""
        self._shutting_down = True

    async def stop(self) -> None:
        """Stop background work. Pending requests stay pending: their runs are checkpointed
        and resume on the next start."""
        self.begin_shutdown()
        await self.hub.stop_sweep()
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry_task
            self._expiry_task = None
        for task in list(self._background):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 5)

    def on_change(self, listener: Listener) -> None:
        """Call ``listener`` with every request this process creates or decides."""
        self._listeners.append(listener)

    def announce_with(self, within: AfterTransition, alone: Listener) -> None:
        """Announce this process's changes to other instances: ``within`` runs inside the
        transaction of a creation or a status change (the announcement commits with the
        change, with no transaction of its own); ``alone`` announces a change that was not
        (a flag or a delivery recorded by itself, a published request)."""
        self._announcers.append((within, alone))

    def publish(self, request: ConfirmationRequest) -> None:
        """Tell the listeners (inbox, other instances) that ``request`` changed."""
        self._changed(request)

    def _announcing(self, then: AfterTransition | None
                    ) -> tuple[AfterTransition | None, _Announced]:
        """``then`` followed, in the same transaction, by the announcement of the change."""
        note = _Announced()
        if not self._announcers:
            return then, note

        async def announce(tx: Transaction, after: ConfirmationRequest) -> None:
            for within, _alone in self._announcers:
                await within(tx, after)
            note.done = True

        return _both(then, announce), note

    def _changed(self, request: ConfirmationRequest, announced: _Announced | None = None
                 ) -> None:
        listeners = self._listeners if announced is not None and announced.done else [
            *self._listeners, *(alone for _within, alone in self._announcers)]
        for listener in listeners:
            try:
                listener(request)
            except Exception:
                log.exception("approval listener failed")

    # -- the gate's side ---------------------------------------------------------------------

    async def request_and_wait(self, ask: ApprovalAsk, *, wait_s: float | None = None,
                               retry: RetryReuse | None = None) -> ApprovalDecision:
        """The decision on ``ask``'s request (created and delivered if new). With ``wait_s``,
        raises StillPending after that long without a decision, leaving the request pending
        (a caller that cannot hold the call, such as a Claude Code hook, asks again later).
        ``retry`` (only from a path whose clients retry under a new call id): a call with no
        request of its own joins the request of an identical call that gave up waiting
        (hookgate.hooks.coverage), instead of asking again."""
        self._agents_seen[ask.agent.id] = ask.agent
        if ask.agent.refuse_retry_after_rejection:
            found = await self.store.for_call_or_rejected_like(
                ask.run_id, ask.tool_call_id, ask.tool_name, ask.args_sha256)
            own = found is not None and found.tool_call_id == ask.tool_call_id
            request, earlier = (found, None) if own else (None, found)
        else:
            request, earlier = await self.store.for_call(ask.run_id, ask.tool_call_id), None
        joined = None
        if request is None and earlier is None and retry is not None:
            request = await self._given_up_like(ask, retry)
            joined = retry if request is not None else None
        resumed = request is not None
        if earlier is not None:
            # A person said no to this exact call in this run: asking again would let a
            # model wear the approver down by retrying.
            return ApprovalDecision(
                request_id=earlier.id, status="rejected", args_sha256=earlier.args_sha256,
                decided_by=earlier.responded_by, reason=earlier.reason,
                responded_at=earlier.responded_at.isoformat() if earlier.responded_at
                else None, repeat_of=earlier.id)
        if request is None:
            await ask.completed()  # what rules, quorums and the new request read
            rule = await self.rules.match(ask)
            if rule is not None:
                return _by_rule(ask, rule)
            try:
                request = await self._create(ask)
            except asyncio.CancelledError:  # the row may be in: the inbox lists it
                await self._cancelled_while_asking(ask)
                raise
        if not coverage(request.binding, ask.binding, retry=joined).covered:
            # The call id was used before in this run for another call: that request (and
            # its decision) belongs to that call; the gate refuses this one without asking.
            return _decision(request)
        if resumed:
            # What the standing rules in shadow mode would have decided when it was asked,
            # for this pass's audit row (counted then): they never decide.
            recorded_again(ask, request.context)
        if request.pending:
            # Claimed first: the same call held by two processes at once (or resumed while
            # its creator sends the card) sends one card; a claim its sender abandoned (it
            # died before the card went out) is taken over. A call cancelled while its card
            # goes out ends its request as one cancelled while it waits does.
            try:
                await self._deliver_unless_claimed(request, ask, resumed=resumed)
            except asyncio.CancelledError:
                await self._cancelled_while_asking(ask, request.id)
                raise
            _emit(ask, "confirmation_pending", _pending_event(request, resumed))
            request = await timed_wait(self._wait(request, ask, wait_s, made=not resumed),
                                       request, resumed=resumed)
        decision = _decision(request, retry=joined)
        _emit(ask, "confirmation_resolved", {
            "request_id": request.id, "tool_call_id": request.tool_call_id,
            "tool_name": request.tool_name, "status": request.status,
            "decided_by": request.responded_by, "reason": request.reason,
            "changes": request.changes, "message": request.message,
        })
        return decision

    async def _given_up_like(self, ask: ApprovalAsk, retry: RetryReuse
                             ) -> ConfirmationRequest | None:
        """The oldest request of ``ask``'s run whose call gave up waiting, not yet used, that
        ``ask`` is the identical retry of (hookgate.hooks.coverage decides)."""
        for request in await self.store.given_up_unused(ask.run_id):
            if coverage(request.binding, ask.binding, retry=retry).retried:
                return request
        return None

    async def _create(self, ask: ApprovalAsk) -> ConfirmationRequest:
        agent = ask.agent
        mode, found = route(agent, self.channels)
        need = authority.requirement_for(ask)
        context = approval_context(ask)
        if ask.shadow:
            context[SHADOW_KEY] = stored_shadow(ask.shadow)
        context["reasons"] += [{"kind": "quorum", "text": t} for t in need.reasons]
        context = routed_context(context, found)
        now = await self.db.now()
        root = ask.metadata.get("root_run_id")
        then, announced = self._announcing(None)
        request, created = await self.store.create(
            then=then,
            run_id=ask.run_id,
            root_run_id=root if isinstance(root, str) and root != ask.run_id else None,
            tool_call_id=ask.tool_call_id,
            agent_id=agent.id,
            requested_by=ask.user_id,
            org_id=ask.org_id if ask.org_id is not None else agent.org_id,
            mode=mode,
            channel_id=found[0].id if found else None,
            approver_scope=agent.confirmation_approver_scope,
            agent_owner_id=agent.owner_user_id,
            tool_name=ask.tool_name,
            args=ask.args,
            args_sha256=ask.args_sha256,
            created_at=now,
            expires_at=now + timedelta(seconds=agent.confirmation_timeout_s),
            context=context,
            followup=agent.followup.to_json(),
            approvals_required=need.approvals_required,
            allow_self_approval=need.allow_self_approval,
        )
        if created:
            self._changed(request, announced)
            if self.escalations is not None:
                try:
                    await self.escalations.created(request)
                except Exception:
                    # The request still times out by itself; its follow-ups are what failed.
                    log.exception("scheduling the follow-ups of request %s failed", request.id)
        return request

    async def _deliver_unless_claimed(self, request: ConfirmationRequest, ask: ApprovalAsk,
                                      *, resumed: bool) -> None:
        if request.mode != "channel" or not (
                request.delivery_ref is None or is_delivery_claim(request.delivery_ref)):
            return
        if await self.store.claim_delivery(request.id, resumed=resumed):
            await self._deliver(request, ask)

    async def _deliver(self, request: ConfirmationRequest, ask: ApprovalAsk) -> None:
        """Send the request's card to each of its channels at once. Each card is recorded
        as soon as its platform took it, so a slow or failing channel holds up no other;
        the request is cancelled only when no channel took its card."""
        targets = routed_channels(request)
        card = ApprovalCard(
            request_id=request.id, tool_name=request.tool_name,
            args=card_args(request.args),
            agent_id=ask.agent.id, agent_name=ask.agent.name, requester=request.requested_by,
            expires_at=request.expires_at, inbox_url=self.inbox_url(request.id),
            org_id=request.org_id, context=request.context,
            reasons=card_reasons(request.context), numbers=card_numbers(request.args),
            editable=self.can_edit(request),
        )
        sent = await asyncio.gather(*(self._send_card(request, card, channel_id, own=i == 0)
                                      for i, channel_id in enumerate(targets)))
        failures = [f"{channel_id}: {error}" for channel_id, error in zip(targets, sent,
                                                                           strict=True)
                    if error is not None]
        if targets and len(failures) == len(targets):
            why = "; ".join(failures) if len(targets) > 1 else str(sent[0])
            reason = f"approval card delivery failed: {why}"
            await flag_unreachable(
                EscalationStore(self.db), request,
                f"{DELIVERY_FAILED}the approval card could not be sent: {why}",
                DELIVERY_FAILED_CAUSE)
            await self._finish(request.id, "cancelled", reason=reason)
            raise ApprovalDeliveryFailed(f"request {request.id} cancelled: {reason}")
        if failures:
            log.warning("request %s: the approval card reached %d of %d channels; not "
                        "delivered on %s", request.id, len(targets) - len(failures),
                        len(targets), "; ".join(failures))

    async def _send_card(self, request: ConfirmationRequest, card: ApprovalCard,
                         channel_id: str, *, own: bool) -> Exception | None:
        """Send ``card`` on one channel and record where it landed (the request's own
        channel in its delivery record, a further one beside the escalation cards); the
        error instead, when the platform did not take it."""
        channel = self.channels.get(channel_id) if self.channels else None
        try:
            if channel is None:
                raise DeliveryError(f"channel '{channel_id}' is not available")
            delivered = await channel.send_card(
                card if own else replace(card, delivery_key=f"{request.id}-{channel_id}"))
        except Exception as exc:
            if own:
                # No card to update on the own channel; the claim is settled all the same.
                await self.store.set_delivery(request.id, {"channel_id": channel_id,
                                                           UNDELIVERED: str(exc)})
            return exc
        ref = {"channel_id": delivered.channel_id, **delivered.ref}
        if own:
            await self.store.set_delivery(request.id, ref)
        else:
            await EscalationStore(self.db).add_escalation_ref(request.id, ref)
        # A decision can land between this card going out and its record; that decision
        # found no card here to update, so update it now.
        after = await self.store.get(request.id)
        if after is not None and not after.pending and channel is not None:
            self._spawn_update(channel, delivered, after.card_outcome())
        return None

    async def _wait(self, request: ConfirmationRequest, ask: ApprovalAsk,
                    wait_s: float | None = None, *, made: bool = False) -> ConfirmationRequest:
        """``made``: ``request`` was just created by this call."""
        if made and request.seconds_left() > 0 and self.continuations.parks(ask):
            # Parked without reading back the request just made: a decision that lands
            # meanwhile continues the run all the same (the run queue queues its advance).
            raise RunParked(request.id, expires_at=request.expires_at, made=True)
        loop = asyncio.get_running_loop()
        give_up = None if wait_s is None else loop.time() + wait_s
        while True:
            fut = self.hub.waiter(request.id)
            try:
                current = await self.store.get(request.id)
                if current is None:
                    raise RequestNotFound(f"request {request.id} disappeared while waiting")
                if not current.pending:
                    return current
                left = current.seconds_left()
                if left > 0 and self.continuations.parks(ask):
                    raise RunParked(current.id, expires_at=current.expires_at)
                if give_up is not None and left > 0:
                    if loop.time() >= give_up:
                        raise StillPending(current)
                    left = min(left, give_up - loop.time())
                # A card still being sent by someone: look again once that claim could be
                # abandoned (its sender gone), and send the card then.
                claimed = current.mode == "channel" and is_delivery_claim(current.delivery_ref)
                nap = min(left, delivery_claims.STALE_S) if claimed else left
                if left > 0:
                    try:
                        woken_with = await asyncio.wait_for(fut, nap)
                    except TimeoutError:
                        if give_up is not None and loop.time() >= give_up:
                            continue  # the loop reads the request once more, then gives up
                        if nap < left:
                            await self._deliver_unless_claimed(current, ask, resumed=False)
                            continue
                        woken_with = None
                    else:
                        if woken_with is not None and not woken_with.pending:
                            return woken_with
                        continue
                await self._time_out(current.id)
            except asyncio.CancelledError:
                await self._cancelled_while_asking(ask, request.id)
                raise
            finally:
                self.hub.discard(request.id, fut)

    async def _cancelled_while_asking(self, ask: ApprovalAsk,
                                      request_id: str | None = None) -> None:
        """The call asking (its run, or its client's task) was cancelled once its request
        may exist: from the insert on, while its card goes out and while it waits. The
        request (``request_id``, or the call's own if the insert got in) ends as cancelled,
        so no later approval runs it. Not when this process is shutting down: its runs
        resume the request elsewhere or after the restart."""
        if self._shutting_down:
            return

        async def cancel() -> None:
            if request_id is not None:
                await self._finish(request_id, "cancelled", reason="the run was cancelled")
                return
            made = await self.store.for_call(ask.run_id, ask.tool_call_id)
            if made is not None and made.pending:
                await self._finish(made.id, "cancelled", reason="the run was cancelled")

        await asyncio.shield(cancel())

    # -- the deciders' side ------------------------------------------------------------------

    async def decide(
        self, request_id: str, decision: str, who: Approver, reason: str | None = None, *,
        arguments: Any = None, message: str | None = None,
        with_decision: AfterTransition | None = None,
        read: ConfirmationRequest | None = None,
    ) -> ConfirmationRequest:
        """Approve or reject. ``arguments`` (approvals only) are the approver's edit: what
        may run instead; ``message`` is for the model; ``with_decision`` writes more in the
        transaction that ends the request (e.g. a rule remembered with it); ``read`` is the
        request as the caller just read it (saves reading it again: the compare-and-set
        decides whether it is still pending). Raises RequestNotFound, NotEligible,
        AlreadyDecided or InvalidEdit; in each of those cases nothing changed."""
        if decision not in ("approve", "reject"):
            raise ValueError(f"decision must be 'approve' or 'reject', not {decision!r}")
        request = read if read is not None and read.id == request_id else \
            await self.store.get(request_id)
        if request is None:
            raise RequestNotFound(f"no confirmation request '{request_id}'")
        # Checked at the decision itself, whichever way it came (API, chat click, CLI), by
        # the person's current record: membership, enabled, approver scope, four eyes.
        agent = self.agent_of(request)
        why_not = await authority.decider_refusal(
            self.db, request, who, decision,
            approver_groups=agent.approver_groups if agent is not None else ())
        if why_not is not None:
            raise NotEligible(why_not)
        if not request.pending:
            raise AlreadyDecided(request)
        edit = None
        if arguments is not None:
            if decision != "approve":
                raise InvalidEdit("only an approval can carry edited arguments; a rejected "
                                  "call does not run")
            edit = checked_edit(self.tool_of(request), request.tool_name, request.args,
                                arguments)
        if edit is not None:
            # What must approve is read from the call that will run: the edited one.
            agent = self.agent_of(request)
            if agent is None:
                raise InvalidEdit(
                    f"agent '{request.agent_id}' is not configured here, so what the edited "
                    "call needs (quorum, four eyes) cannot be judged; approve or reject the "
                    "call as asked")
            why_not = authority.edit_refusal(
                request, who, authority.requirement_of_run(agent, request, edit[0]))
            if why_not is not None:
                raise EditNeedsMore(why_not)
        # Whether it expired is judged by the database's clock, in the compare-and-set.
        status = "approved" if decision == "approve" else "rejected"
        then, announced = self._announcing(_both(self._after_transition(), with_decision))
        if status == "approved" and request.approvals_required > 1:
            # Towards a quorum: the request stays pending until enough distinct people
            # approved (one reject, below, rejects at once).
            if edit is not None or message:
                raise InvalidEdit(
                    f"request {request_id} needs {request.approvals_required} approvers, who "
                    "must all approve the same call: it cannot be approved with edited "
                    "arguments or a message to the model")
            after = await self.votes.approve(
                request_id, who, reason, then,
                approver_groups=agent.approver_groups if agent is not None else ())
        else:
            try:
                after = await self.store.transition(
                    request_id, status, responded_by=who.user_id,
                    channel_identity=who.channel_identity, reason=reason, via=who.via,
                    edited_args=edit[0] if edit else None,
                    edited_args_sha256=edit[1] if edit else None,
                    message=message, unexpired=True, then=then,
                    vote=final_vote(who, decision, reason),
                )
            except VoteExists:
                raise already_voted(who, request_id) from None
        if after is None:
            latest = await self.store.get(request_id)
            assert latest is not None
            if latest.pending:  # expired by the database's clock, not yet marked
                await self._time_out(request_id)
                latest = await self.store.get(request_id)
                assert latest is not None
            raise AlreadyDecided(latest)
        if after.pending:  # one more approval towards the quorum; the call still waits
            self._changed(after, announced)
            return after
        self.hub.wake(request_id, after)
        self._changed(after, announced)
        self._update_card_later(after)
        return after

    async def cancel(self, request_id: str, reason: str) -> bool:
        return await self._finish(request_id, "cancelled", reason=reason)

    async def cancel_run(self, run_id: str, reason: str) -> int:
        """Cancel every pending request of a run (e.g. a run that cannot be resumed)."""
        n = 0
        for request in await self.store.pending_for_run(run_id):
            n += await self._finish(request.id, "cancelled", reason=reason)
        return n

    async def expire_overdue(self) -> int:
        n = 0
        for request_id in await self.store.overdue():
            n += await self._time_out(request_id)
        return n

    async def _time_out(self, request_id: str) -> bool:
        """End a request nobody decided in time, by its timeout fallback (``on_timeout``):
        ``reject`` records a rejection by the fallback, ``expire`` marks it expired."""
        request = await self.store.get(request_id)
        policy = EscalationPolicy.from_json(request.followup if request else None)
        if policy.on_timeout == "reject":
            return await self._finish(
                request_id, "rejected", via="timeout",
                reason="no decision before the request timed out: rejected by the timeout "
                       "fallback (on_timeout: reject)")
        return await self._finish(request_id, "expired",
                                  reason="no decision before the request expired")

    async def _finish(self, request_id: str, status: str, *, reason: str,
                      via: str | None = None) -> bool:
        then, announced = self._announcing(self._after_transition())
        after = await self.store.transition(request_id, status, reason=reason, via=via,
                                            then=then)
        self.hub.wake(request_id, after)
        if after is None:
            return False
        self._changed(after, announced)
        self._update_card_later(after)
        return True

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(self.expiry_interval)
            try:
                await self.expire_overdue()
            except Exception:
                log.exception("expiring overdue requests failed")

    def update_cards_later(self, request: ConfirmationRequest) -> None:
        """Show the outcome on every card of the request (its own and escalation cards)."""
        self._update_card_later(request)

    def _update_card_later(self, request: ConfirmationRequest) -> None:
        if self.channels is None:
            return
        outcome = request.card_outcome()
        # No card yet (none, or one still being sent): nothing to update on the own channel.
        own = ([request.delivery_ref] if card_delivered(request.delivery_ref)
               and request.channel_id else [])
        for delivered in [*own, *request.escalation_refs]:
            channel_id = str(delivered.get("channel_id") or request.channel_id)
            channel = self.channels.get(channel_id)
            if channel is None:
                continue
            ref = {k: v for k, v in delivered.items() if k != "channel_id"}
            self._spawn_update(channel, DeliveredCard(channel_id, ref), outcome)

    def _spawn_update(self, channel: Channel, card: DeliveredCard,
                      outcome: CardOutcome) -> None:
        async def update() -> None:
            try:
                await channel.update_card(card, outcome)
            except Exception:
                log.exception("updating the card of request %s failed", outcome.request_id)

        task = asyncio.create_task(update())
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def _emit(ask: ApprovalAsk, type_: str, data: dict[str, Any]) -> None:
    if ask.emit is not None:
        ask.emit(type_, data)


def _by_rule(ask: ApprovalAsk, rule: StandingRule) -> ApprovalDecision:
    # No request and no card: the rule's creator decided in advance. Every use is on the
    # run's trace and events ("approved by rule R, created by alice") and counted on the rule.
    use_id = f"{rule.id}#{rule.uses}"
    _emit(ask, "confirmation_resolved", {
        "request_id": use_id, "tool_call_id": ask.tool_call_id, "tool_name": ask.tool_name,
        "status": "approved", "decided_by": rule.created_by, "reason": rule.describe(),
        "rule_id": rule.id,
    })
    return ApprovalDecision(
        request_id=use_id, status="approved", args_sha256=ask.args_sha256,
        decided_by=rule.created_by, reason=rule.describe(), binding=ask.binding,
        rule_id=rule.id)


def _decision(request: ConfirmationRequest, *, retry: RetryReuse | None = None
              ) -> ApprovalDecision:
    return ApprovalDecision(
        request_id=request.id,
        status=request.status,  # type: ignore[arg-type]
        args_sha256=request.args_sha256,
        decided_by=request.responded_by,
        decided_identity=request.responder_channel_identity,
        reason=request.reason,
        responded_at=request.responded_at.isoformat() if request.responded_at else None,
        requested_at=request.created_at.isoformat(),
        binding=request.binding,
        edited_args=request.edited_args,
        edited_args_sha256=request.edited_args_sha256,
        message=request.message,
        retry=retry,
    )


def _pending_event(request: ConfirmationRequest, resumed: bool) -> dict[str, Any]:
    return {
        "request_id": request.id,
        "tool_call_id": request.tool_call_id,
        "tool_name": request.tool_name,
        "args": request.args,
        "mode": request.mode,
        "channel_id": request.channel_id,
        "approver_scope": request.approver_scope,
        "expires_at": request.expires_at.isoformat(),
        "resumed": resumed,
    }


class _Announced:
    """Whether a change was announced inside its own transaction."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = False


def _both(first: AfterTransition | None, second: AfterTransition | None
          ) -> AfterTransition | None:
    """``first`` then ``second`` in the same transaction (either may be None)."""
    if first is None or second is None:
        return first or second

    async def both(tx: Transaction, after: ConfirmationRequest) -> None:
        await first(tx, after)
        await second(tx, after)

    return both
