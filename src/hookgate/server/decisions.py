"""Deciding one request for an API caller: the approval service's refusals as HTTP statuses,
shared by the single and the batch decision routes so both answer alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hookgate.approvals.eligibility import Approver
from hookgate.approvals.errors import AlreadyDecided, InvalidEdit, NotEligible, RequestNotFound
from hookgate.approvals.quorum import AlreadyVoted
from hookgate.approvals.records import ConfirmationRequest
from hookgate.approvals.store import AfterTransition
from hookgate.runtime.runtime import Caller, Runtime


@dataclass(slots=True, frozen=True)
class Decided:
    """The request as it now is (``status_code`` 200), or why nothing changed."""

    status_code: int
    request: ConfirmationRequest | None = None
    error: str | None = None


async def decide_for(rt: Runtime, caller: Caller, request_id: str, decision: str, *,
                     via: str, reason: str | None = None, arguments: Any = None,
                     message: str | None = None,
                     with_decision: AfterTransition | None = None,
                     read: ConfirmationRequest | None = None) -> Decided:
    """``caller``'s decision on one request of their org; a request of another org is
    answered as missing (404), as if it did not exist. ``read``: the request as the caller
    just read it, not read again."""
    request = read if read is not None and read.id == request_id else \
        await rt.approvals.store.get(request_id)
    if request is None or request.org_id != caller.org_id:
        return Decided(404, error=f"no confirmation request '{request_id}'")
    try:
        decided = await rt.approvals.decide(
            request_id, decision, Approver(caller.user_id, caller.org_id, caller.admin,
                                          channel_identity=caller.verified_identity, via=via,
                                          service=caller.service),
            reason=reason, arguments=arguments, message=message,
            with_decision=with_decision, read=request)
    except RequestNotFound as exc:
        return Decided(404, error=str(exc))
    except NotEligible as exc:
        return Decided(403, error=f"not allowed: {exc}")
    except AlreadyDecided as exc:
        return Decided(409, request=exc.request, error=str(exc))
    except AlreadyVoted as exc:
        return Decided(409, error=str(exc))
    except InvalidEdit as exc:
        return Decided(422, error=str(exc))
    return Decided(200, request=decided)
