"""Counters of the approval follow-ups: requests nobody can be reached for, and the
reminders and escalations sent."""

from __future__ import annotations

from hookgate.telemetry import names
from hookgate.telemetry.instruments import instruments
from hookgate.telemetry.switch import SWITCH


def approval_unreachable(cause: str, mode: str) -> None:
    """Count one request flagged unreachable (``cause``: no_approver, delivery_failed)."""
    if SWITCH.on:
        instruments().approvals_unreachable.add(1, {names.APPROVAL_UNREACHABLE_CAUSE: cause,
                                                    names.APPROVAL_MODE: mode})


def followup_sent(kind: str) -> None:
    """Count one reminder or escalation this process sent."""
    if SWITCH.on:
        instruments().approval_followups.add(1, {names.APPROVAL_FOLLOWUP_KIND: kind})
