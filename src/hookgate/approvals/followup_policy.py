"""The follow-up policy as the approvals package names it (reminders, escalation, the timeout
fallback). It is owned by hookgate.followup_policy: an Agent carries one, and the agent sits
below the approvals, so the value lives below both; this module re-exports it.
"""

from hookgate.followup_policy import (
    ESCALATION_GROUPS,
    ON_TIMEOUT,
    FollowupPolicy,
    OnTimeout,
    PolicyError,
    parse_duration,
)

__all__ = ["ESCALATION_GROUPS", "ON_TIMEOUT", "FollowupPolicy", "OnTimeout", "PolicyError",
           "parse_duration"]
