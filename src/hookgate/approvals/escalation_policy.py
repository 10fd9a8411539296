"""The follow-up policy as the approvals package names it (reminders, escalation, the timeout
fallback). It is owned by hookgate.escalation_policy: an Agent carries one, and the agent sits
below the approvals, so the value lives below both; this module re-exports it.
"""

from hookgate.escalation_policy import (
    ESCALATION_GROUPS,
    ON_TIMEOUT,
    EscalationPolicy,
    OnTimeout,
    PolicyError,
    parse_duration,
)

__all__ = ["ESCALATION_GROUPS", "ON_TIMEOUT", "EscalationPolicy", "OnTimeout", "PolicyError",
           "parse_duration"]
