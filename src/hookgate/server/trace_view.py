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
from hookgate.hooks.withheld import shown_args, shown_changes


def for_caller(value: Any, admin: bool) -> Any:
    """``value`` (an event, or anything in one) as the caller may see it."""
    if admin:
        return value
    return _without_output(value)


#: The keys of a trace event that hold a tool call's arguments (as asked, or rewritten).
ARGUMENT_KEYS = frozenset({"args", "modified_args", "edited_args"})
#: The key of a decision event (``confirmation_resolved``) that holds an approver's edit.
CHANGES_KEY = "changes"


def _without_output(value: Any) -> Any:
    # Events nest traces (a delegate's or an agent node's), so look at every depth.
    if isinstance(value, dict):
        return {k: _member_value(k, v) for k, v in value.items() if k not in ADMIN_KEYS}
    if isinstance(value, list):
        return [_without_output(v) for v in value]
    return value


def _member_value(key: str, value: Any) -> Any:
    if key in ARGUMENT_KEYS:
        return shown_args(value)
    if key == CHANGES_KEY and isinstance(value, list):
        return shown_changes(c for c in value if isinstance(c, dict))
    return _without_output(value)


def request_for_caller(out: dict[str, Any], request: ConfirmationRequest, user_id: str,
                       org_id: str, admin: bool) -> dict[str, Any]:
    """``out`` (the request's ``to_dict``) as the caller may see it: whole for the org's
    admins, the requester and whoever may decide it; for any other member, every value under
    a secret-looking key (``api_key``, ``token`` …) masked in the arguments and the
    approver's edits, as on the approval cards."""
    raw = admin or user_id == request.requested_by or authority.may_decide(
        request, Approver(user_id, org_id), "reject")
    if raw:
        return out
    payload = dict(out["payload"])
    payload["args"] = shown_args(payload["args"])
    if payload.get("edited_args") is not None:
        payload["edited_args"] = shown_args(payload["edited_args"])
    # The readable numbers never hold a secret-keyed value (approvals/context.py).
    return {**out, "payload": payload, "changes": shown_changes(out["changes"])}
