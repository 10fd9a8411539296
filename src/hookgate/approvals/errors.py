"""Errors of the approval state machine, each with a message a person can act on."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hookgate.approvals.records import ConfirmationRequest


class ApprovalError(Exception):
    """Base class of approval errors."""


class RequestNotFound(ApprovalError):
    """No confirmation request with that id (or not visible to the caller)."""


class NotEligible(ApprovalError):
    """The person may not decide this request under its approver scope."""


class AlreadyDecided(ApprovalError):
    """The request left ``pending`` before this decision; nothing changed."""

    def __init__(self, request: ConfirmationRequest) -> None:
        who = f" by {request.responded_by}" if request.responded_by else ""
        when = f" at {request.responded_at.isoformat()}" if request.responded_at else ""
        super().__init__(f"already decided: {request.status}{who}{when}")
        self.request = request


class RoutingError(ApprovalError):
    """No way to reach an approver (e.g. channel_only with no channel)."""


class InvalidEdit(ApprovalError):
    """Arguments an approver edited that may not run: refused at the arguments boundary or
    by the tool's schema, or a tool whose arguments cannot be edited; nothing changed."""


class EditNeedsMore(InvalidEdit):
    """An edit whose call needs more than the approval at hand gives (more approvers, or
    four eyes against the approving requester); nothing changed."""
