"""Who may decide a request: the approver scope rules (initiator, agent_owner, org_members)."""

from __future__ import annotations

from dataclasses import dataclass

from hookgate.approvals.records import ConfirmationRequest

#: Where a decision can come from: the portal, the HTTP API, the CLI, or a chat channel.
DECISION_CHANNELS = ("inbox", "api", "cli", "feishu", "slack", "wecom")


@dataclass(slots=True, frozen=True)
class Approver:
    """A person deciding: their hookgate user, org, and (for chat clicks) platform identity."""

    user_id: str
    org_id: str | None
    admin: bool = False
    channel_identity: str | None = None
    #: Through what the decision comes (DECISION_CHANNELS), kept on the request.
    via: str = "api"


def refusal(request: ConfirmationRequest, who: Approver) -> str | None:
    """Why ``who`` may not decide ``request`` (None when they may)."""
    if who.org_id != request.org_id:
        return f"user '{who.user_id}' is not a member of org '{request.org_id}'"
    if who.user_id in request.escalated_to:
        return None  # made an approver by the request's escalation
    scope = request.approver_scope
    if scope == "initiator" and who.user_id != request.requested_by:
        return (f"only the user who started the run ('{request.requested_by}') may decide "
                "this request")
    if scope == "agent_owner" and who.user_id != request.agent_owner_id:
        return (f"only the agent's owner ('{request.agent_owner_id}') may decide this request")
    if scope not in ("initiator", "agent_owner", "org_members"):
        return f"unknown approver scope '{scope}'"
    return None
