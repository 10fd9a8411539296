"""What of a run's trace or a confirmation request a caller may see: the admin-only texts
and a trace's exact arguments are for org admins only (members read the arguments as the
cards show them, secret-looking values masked); a request's exact arguments are for those who
asked, may decide or administer, and other members read them as the cards show them.

A failed hook's output (``admin_output``) and a tool's error (``admin_error``), both masked
`Withheld` texts, may quote a tool's raw result that a hook withheld or rewrote; members see
that the hook failed and how (the tool failed, and with which exception), not what was said.
This is the one door: every route that returns a run's trace or events calls `for_caller`,
every route that returns a confirmation request calls `request_for_caller`.
"""

from __future__ import annotations

from typing import Any

from hookgate.approvals import authority
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.records import ConfirmationRequest
from hookgate.hooks.trace import ADMIN_KEYS
from hookgate.hooks.withheld import MASK, is_secret_key, mask_secrets


def for_caller(value: Any, admin: bool) -> Any:
    """``value`` (an event, or anything in one) as the caller may see it."""
    if admin:
        return value
    return _without_output(value)


#: The keys of a trace event that hold a tool call's arguments (as asked, or rewritten).
ARGUMENT_KEYS = frozenset({"args", "modified_args", "edited_args"})


def _without_output(value: Any) -> Any:
    # Events nest traces (a delegate's or an agent node's), so look at every depth.
    if isinstance(value, dict):
        return {k: mask_secrets(v) if k in ARGUMENT_KEYS else _without_output(v)
                for k, v in value.items() if k not in ADMIN_KEYS}
    if isinstance(value, list):
        return [_without_output(v) for v in value]
    return value


def request_for_caller(out: dict[str, Any], request: ConfirmationRequest, user_id: str,
                       org_id: str, admin: bool) -> dict[str, Any]:
    """``out`` (the request's ``to_dict``) as the caller may see it: whole for the org's
    admins, the requester and whoever may decide it; for any other member, every value under
    a secret-looking key (``api_key``, ``token`` …) masked in the arguments and the
    approver's edits, as on the approval cards."""
    if admin or user_id == request.requested_by or authority.may_decide(
            request, Approver(user_id, org_id), "reject"):
        return out
    payload = dict(out["payload"])
    payload["args"] = mask_secrets(payload["args"])
    if payload.get("edited_args") is not None:
        payload["edited_args"] = mask_secrets(payload["edited_args"])
    changes = [{**c, "before": MASK, "after": MASK} if _secret_path(str(c["path"])) else c
               for c in out["changes"]]
    # The readable numbers never hold a secret-keyed value (approvals/context.py).
    return {**out, "payload": payload, "changes": changes}


def _secret_path(path: str) -> bool:
    return any(is_secret_key(part) for part in path.replace("[", ".").split("."))
