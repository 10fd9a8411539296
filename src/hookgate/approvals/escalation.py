"""Following up on requests nobody decides: reminders, escalation, unreachable approvers.

`Escalations.run_due` does whatever is due for one request (by the database's clock) and says
when to look again; a scheduler calls it at that time (a procrastinate job on PostgreSQL,
a timer of this process on SQLite). Each reminder and the escalation is claimed by a
compare-and-set before anything is sent, so however many instances look, one sends it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from hookgate.approvals.card_text import card_args, card_numbers, card_reasons
from hookgate.approvals.delivery_claims import card_delivered
from hookgate.approvals.escalation_store import EscalationStore
from hookgate.approvals.reachability import (
    DELIVERY_FAILED,
    DELIVERY_FAILED_CAUSE,
    NO_APPROVER,
    NO_APPROVER_CAUSE,
    flag_unreachable,
    nobody_to_decide,
)
from hookgate.approvals.records import ConfirmationRequest
from hookgate.channels.base import ApprovalCard
from hookgate.channels.card_text import format_time
from hookgate.escalation_policy import EscalationPolicy
from hookgate.telemetry.escalations import followup_sent

if TYPE_CHECKING:
    from hookgate.approvals.persistent import PersistentApprovals

log = logging.getLogger(__name__)


class EscalationScheduler(Protocol):
    """Calls `Escalations.run_due` for a request at (or soon after) a time."""

    async def schedule(self, request_id: str, at: datetime) -> None: ...


def next_due(request: ConfirmationRequest) -> datetime | None:
    """When the next reminder or the escalation of ``request`` is due (None: nothing more
    before it times out)."""
    if not request.pending or not request.followup:
        return None
    policy = EscalationPolicy.from_json(request.followup)
    times = [t for t in (policy.next_reminder_at(request.created_at, request.reminders_sent),
                         policy.escalation_at(request.created_at, request.escalated_at))
             if t is not None and t < request.expires_at]
    return min(times) if times else None


def delivered_channels(request: ConfirmationRequest) -> list[str]:
    """The channels the request's cards went to (its own, each further routed channel's,
    then the escalation's), once each."""
    refs = [request.delivery_ref, *request.escalation_refs]
    out: list[str] = []
    for ref in refs:
        if not card_delivered(ref):
            continue
        channel_id = ref.get("channel_id")
        if isinstance(channel_id, str) and channel_id not in out:
            out.append(channel_id)
    return out


class Escalations:
    """Reminders, escalation and reachability for the requests of one approval service."""

    def __init__(self, approvals: PersistentApprovals, *,
                 agent_name: Callable[[str], str] | None = None,
                 scheduler: Callable[[Escalations], EscalationScheduler] | None = None) -> None:
        """``scheduler`` builds what runs each request's next follow-up at its time (in
        process, or as a queued job); without one, follow-ups are checked but not timed."""
        self.approvals = approvals
        self.store = EscalationStore(approvals.db)
        self.agent_name = agent_name or (lambda agent_id: agent_id)
        self.scheduler: EscalationScheduler | None = (scheduler(self) if scheduler is not None
                                                    else None)

    # -- entry points ----------------------------------------------------------------------

    async def created(self, request: ConfirmationRequest) -> None:
        """A new request: check someone can decide it, and schedule its first follow-up."""
        await self.check_reachable(request)
        await self.schedule(request)

    async def schedule(self, request: ConfirmationRequest) -> None:
        due = next_due(request)
        if due is not None and self.scheduler is not None:
            await self.scheduler.schedule(request.id, due)

    async def reschedule_all(self) -> int:
        """Schedule every pending request's next follow-up (after a start)."""
        n = 0
        for request in await self.store.pending_with_followups():
            if next_due(request) is not None:
                await self.schedule(request)
                n += 1
        return n

    async def run_due(self, request_id: str) -> datetime | None:
        """Send what is due for the request now; the time of its next follow-up, if any."""
        request = await self.approvals.store.get(request_id)
        if request is None or not request.pending or not request.followup:
            return None
        policy = EscalationPolicy.from_json(request.followup)
        now = await self.approvals.db.now()
        if now >= request.expires_at:
            return None  # the timeout fallback's turn
        escalation = policy.escalation_at(request.created_at, request.escalated_at)
        if escalation is not None and escalation <= now:
            request = await self._escalate(request, policy, now) or request
        if _reminders_due(policy, request, now) > request.reminders_sent:
            request = await self._remind(request, policy, now) or request
        latest = await self.approvals.store.get(request_id)
        return next_due(latest) if latest is not None else None

    # -- reminders -------------------------------------------------------------------------

    async def _remind(self, request: ConfirmationRequest, policy: EscalationPolicy,
                      now: datetime) -> ConfirmationRequest | None:
        # After downtime several reminders may be overdue: one message goes out, and the
        # count jumps to what is due, so a restart does not bring a burst.
        due = _reminders_due(policy, request, now)
        after = await self.store.claim_reminder(request.id, request.reminders_sent, due, now)
        if after is None:
            return None  # another instance sent it, or the request was decided
        text = reminder_text(after, self.agent_name(after.agent_id),
                             self.approvals.inbox_url(after.id))
        channels = delivered_channels(after)
        failures = []
        for channel_id in channels:
            channel = self.approvals.channels.get(channel_id) if self.approvals.channels else None
            try:
                if channel is None:
                    raise LookupError(f"channel '{channel_id}' is not available")
                await channel.notify(text)
            except Exception as exc:
                failures.append(f"{channel_id}: {exc}")
        followup_sent("reminder")
        log.info("request %s: reminder %d sent to %s", after.id, after.reminders_sent,
                 ", ".join(channels) or "the inbox")
        if channels and len(failures) == len(channels):
            await self._flag(after, DELIVERY_FAILED + "the reminder reached no channel ("
                             + "; ".join(failures) + ")", DELIVERY_FAILED_CAUSE)
        elif failures:
            log.warning("request %s: reminder not delivered on %s", after.id,
                        "; ".join(failures))
        elif after.unreachable and after.unreachable.startswith(DELIVERY_FAILED):
            await self.store.set_unreachable(after.id, None)
        return await self._publish(after.id)

    # -- escalation ------------------------------------------------------------------------

    async def _escalate(self, request: ConfirmationRequest, policy: EscalationPolicy,
                        now: datetime) -> ConfirmationRequest | None:
        users = await self._escalation_users(request, policy)
        after = await self.store.claim_escalation(request.id, users, now)
        if after is None:
            return None
        followup_sent("escalation")
        log.info("request %s escalated to %s", after.id, ", ".join(users) or "nobody")
        # Default: the first channel a card of the request reached.
        reached = delivered_channels(after)
        channel_id = policy.escalation_channel_id or (reached[0] if reached else None) or (
            after.channel_id)
        if channel_id:
            await self._send_escalation_card(after, channel_id, users)
        await self.check_reachable(await self._publish(after.id) or after)
        return await self.approvals.store.get(after.id)

    async def _escalation_users(self, request: ConfirmationRequest,
                                policy: EscalationPolicy) -> list[str]:
        users: list[str] = []
        for name in policy.escalate_to:
            if name == "admins":
                found = await self.store.enabled_users(request.org_id, admins_only=True)
            elif name == "agent_owner":
                found = [request.agent_owner_id] if request.agent_owner_id else []
            else:
                found = [name]
            users.extend(u for u in found if u not in users)
        return users

    async def _send_escalation_card(self, request: ConfirmationRequest, channel_id: str,
                                    users: list[str]) -> None:
        channel = self.approvals.channels.get(channel_id) if self.approvals.channels else None
        note = escalation_note(request, users)
        try:
            if channel is None:
                raise LookupError(f"channel '{channel_id}' is not available")
            delivered = await channel.send_card(ApprovalCard(
                request_id=request.id, tool_name=request.tool_name,
                args=card_args(request.args),
                agent_id=request.agent_id, agent_name=self.agent_name(request.agent_id),
                requester=request.requested_by, expires_at=request.expires_at,
                inbox_url=self.approvals.inbox_url(request.id), org_id=request.org_id,
                context={**(request.context or {}), "escalation": note},
                delivery_key=f"{request.id}-escalation",
                reasons=card_reasons(request.context), numbers=card_numbers(request.args),
                editable=self.approvals.can_edit(request),
            ))
        except Exception as exc:
            await self._flag(request, f"{DELIVERY_FAILED}the escalation card to "
                             f"{', '.join(users)} could not be sent on {channel_id}: {exc}",
                             DELIVERY_FAILED_CAUSE)
            return
        await self.store.add_escalation_ref(request.id, {"channel_id": delivered.channel_id,
                                                         **delivered.ref})
        # A decision that landed while the card went out found no escalation card to update.
        latest = await self.approvals.store.get(request.id)
        if latest is not None and not latest.pending:
            self.approvals.update_cards_later(latest)

    # -- reachability ----------------------------------------------------------------------

    async def check_reachable(self, request: ConfirmationRequest) -> None:
        """Flag the request when nobody who may decide it can be found (or clear a flag
        that escalation made untrue)."""
        if not request.pending:
            return
        why = await nobody_to_decide(self.store, request)
        if why is not None:
            if request.unreachable is None:
                await self._flag(request, NO_APPROVER + why, NO_APPROVER_CAUSE)
        elif request.unreachable and request.unreachable.startswith(NO_APPROVER):
            await self.store.set_unreachable(request.id, None)
            await self._publish(request.id)

    async def _flag(self, request: ConfirmationRequest, reason: str, cause: str) -> None:
        await flag_unreachable(self.store, request, reason, cause)
        await self._publish(request.id)

    async def _publish(self, request_id: str) -> ConfirmationRequest | None:
        latest = await self.approvals.store.get(request_id)
        if latest is not None:
            self.approvals.publish(latest)
        return latest


def _reminders_due(policy: EscalationPolicy, request: ConfirmationRequest,
                   now: datetime) -> int:
    if policy.remind_after_s is None:
        return 0
    elapsed = (now - request.created_at).total_seconds()
    return min(policy.max_reminders, int(elapsed // policy.remind_after_s))


def reminder_text(request: ConfirmationRequest, agent_name: str, link: str | None) -> str:
    """The reminder posted to every channel the request's cards went to."""
    who = f", asked by {request.requested_by}" if request.requested_by else ""
    waiting = f"since {format_time(request.created_at)}"
    lines = [f"Reminder: approval request {request.id} ({request.tool_name}, agent "
             f"{agent_name}{who}) still waits for a decision {waiting}.",
             f"It times out at {format_time(request.expires_at)}."]
    if request.escalated_to:
        lines.append(f"Escalated to: {', '.join(request.escalated_to)}.")
    if link:
        lines.append(f"Decide: {link}")
    return "\n".join(lines)


def escalation_note(request: ConfirmationRequest, users: list[str]) -> str:
    """The line an escalation card adds above the request's context (names first: WeCom
    shows 44 characters of it)."""
    waited = ""
    if request.escalated_at is not None:
        minutes = (request.escalated_at - request.created_at).total_seconds() / 60
        waited = f" (no decision in {minutes:.0f} min)" if minutes >= 1 else (
            " (no decision in under a minute)")
    return f"Escalated to {', '.join(users) or 'nobody'}{waited}"

