"""Claims to send a request's card, and when one is abandoned.

Before a card goes out, the sender writes a claim into the request's ``delivery_ref`` with
a conditional UPDATE, so two processes holding the same new request send one card. A
claim names its process and time; the card's own record replaces it once the platform
answered. A process that dies between the two leaves the claim behind, and the card would
never go out. So a claim is taken over:

- by a process that resumes the request (a run continued after a crash, a takeover or a
  restart) when another process made the claim more than ``TAKEOVER_S`` ago (a run
  retried after its worker died resumes 30 s or more later, the stalled-worker timeout);
- by anyone once it is older than ``STALE_S``: no send takes so long (the delivery
  policy gives up after 60 s), so its sender is gone.

At worst a sender that is alive but slower than that and the one taking over both send: a
second card of the same request, which decides the same request.

A request routed to several channels has one claim for all its cards; the record that
replaces it is the own channel's card, or ``UNDELIVERED`` (why) when that platform did not
take it while another did: there is no card there to update.
"""

from __future__ import annotations

import math
import uuid
from datetime import datetime
from typing import Any, TypeGuard

#: This process, as its claims name it.
PROCESS_ID = uuid.uuid4().hex[:16]
#: Age (s) after which a resuming process takes over another process's claim.
TAKEOVER_S = 10.0
#: Age (s) after which anyone takes a claim over.
STALE_S = 90.0
#: The key of a delivery record whose card did not go out (its value says why).
UNDELIVERED = "undelivered"


def delivery_claim(at: datetime) -> dict[str, Any]:
    """A new claim of this process, made at ``at`` (the database's clock)."""
    return {"sending": True, "by": PROCESS_ID, "claim": uuid.uuid4().hex,
            "at": at.isoformat()}


def is_delivery_claim(ref: Any) -> bool:
    """True for a claim (a card being sent), False for a delivered card's record or none."""
    return isinstance(ref, dict) and ref.get("sending") is True


def claim_abandoned(ref: Any, now: datetime, *, resumed: bool) -> bool:
    """Whether the claim ``ref`` may be taken over at ``now`` by this process."""
    if not is_delivery_claim(ref):
        return False
    try:
        age = (now - datetime.fromisoformat(str(ref["at"]))).total_seconds()
    except (KeyError, ValueError, TypeError):
        age = math.inf  # a claim without a readable time: nobody can say it is fresh
    if age >= STALE_S:
        return True
    return resumed and ref.get("by") != PROCESS_ID and age >= TAKEOVER_S


def card_delivered(ref: Any) -> TypeGuard[dict[str, Any]]:
    """True for the record of a card that went out (one that can be updated)."""
    return isinstance(ref, dict) and "channel_id" in ref and not is_delivery_claim(ref) and (
        UNDELIVERED not in ref)
