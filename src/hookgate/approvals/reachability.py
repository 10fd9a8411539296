"""Whether anyone can decide a request, and the one way a request is flagged when nobody
can: the ``unreachable`` reason on the row, a warning in the log and the
``hookgate.approval.unreachable`` counter — never silent."""

from __future__ import annotations

import logging

from hookgate.approvals import authority
from hookgate.approvals.escalation_store import EscalationStore
from hookgate.approvals.records import ConfirmationRequest
from hookgate.storage.people import people
from hookgate.telemetry.escalations import approval_unreachable

log = logging.getLogger(__name__)

#: The prefix of a flag set because sends failed (a later success clears it), and its cause.
DELIVERY_FAILED = "delivery failed: "
DELIVERY_FAILED_CAUSE = "delivery_failed"
#: The prefix of a flag set because no approver resolved (an escalation may clear it).
NO_APPROVER = "no approver: "
NO_APPROVER_CAUSE = "no_approver"


async def flag_unreachable(store: EscalationStore, request: ConfirmationRequest, reason: str,
                           cause: str) -> None:
    """Record, log and count that no approver of ``request`` can be reached."""
    await store.set_unreachable(request.id, reason)
    approval_unreachable(cause, request.mode)
    log.warning("request %s (%s, run %s): no approver can be reached: %s", request.id,
                request.tool_name, request.run_id, reason)


async def nobody_to_decide(store: EscalationStore, request: ConfirmationRequest) -> str | None:
    """Why nobody who may decide ``request`` can be found (None when someone can).

    The approver scope's users and the escalated ones count when the database knows them
    and they are enabled. The library without a users table cannot tell: None.
    """
    if not await store.any_users():
        return None
    scope = request.approver_scope
    if scope == "initiator":
        named, what = [request.requested_by], "the run has no initiating user"
    elif scope == "agent_owner":
        named, what = [request.agent_owner_id], f"agent '{request.agent_id}' has no owner"
    else:
        named = list(await store.enabled_users(request.org_id))
        what = f"org '{request.org_id}' has no enabled user"
    candidates = [u for u in [*named, *request.escalated_to] if u]
    # Each candidate under the one eligibility check (member of the request's org, enabled,
    # approver scope or escalation), by their current record; an unknown user is nobody.
    records = await people(store.db, candidates)
    seat = authority.Seat.of_request(request)
    if any(u in records and authority.refusal(seat, authority.person(u, records, None),
                                              "reject") is None for u in candidates):
        return None
    if candidates:
        return (f"{', '.join(candidates)} (approver scope {scope}"
                f"{', escalated' if request.escalated_to else ''}) "
                "cannot decide: disabled, in another org or not a known user")
    return what
