"""A person deciding a request, and the channels a decision comes through. Whether they
may decide is approvals/authority.py's to say."""

from __future__ import annotations

from dataclasses import dataclass

#: Where a decision can come from: the portal, the HTTP API, the CLI, or a chat channel.
DECISION_CHANNELS = ("inbox", "api", "cli", "feishu", "slack", "wecom", "telegram",
                     "teams", "discord", "email",
                     "ntfy")


@dataclass(slots=True, frozen=True)
class Approver:
    """A person deciding: their hookgate user, org, and (for chat clicks) platform identity."""

    user_id: str
    org_id: str | None
    admin: bool = False
    channel_identity: str | None = None
    #: Through what the decision comes (DECISION_CHANNELS), kept on the request.
    via: str = "api"
    #: The token signing in is a service (agent) identity's: it never decides.
    service: bool = False
