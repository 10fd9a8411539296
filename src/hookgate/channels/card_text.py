"""The words every platform's approval card uses, so the three read alike."""

from __future__ import annotations

from datetime import UTC, datetime

from hookgate.channels.base import ApprovalCard, CardOutcome

STATUS_TITLES = {
    "approved": "Approved",
    "rejected": "Rejected",
    "expired": "Expired",
    "cancelled": "Cancelled",
}


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def format_time(moment: datetime) -> str:
    return _utc(moment).strftime("%Y-%m-%d %H:%M UTC")


def remaining(expires_at: datetime, now: datetime) -> str:
    """E.g. "14 min", or "expired"."""
    seconds = int((_utc(expires_at) - _utc(now)).total_seconds())
    if seconds <= 0:
        return "expired"
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 2 * 3600:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def time_left(expires_at: datetime, now: datetime) -> str:
    """E.g. "14 min (until 2025-01-01 12:30 UTC)"."""
    span = remaining(expires_at, now)
    if span == "expired":
        return f"expired at {format_time(expires_at)}"
    return f"{span} (until {format_time(expires_at)})"


def agent_label(card: ApprovalCard) -> str:
    if card.agent_name and card.agent_name != card.agent_id:
        return f"{card.agent_name} ({card.agent_id})"
    return card.agent_id


def title(card: ApprovalCard) -> str:
    return f"Approval required: {card.tool_name}"


def summary(card: ApprovalCard) -> str:
    return f"{agent_label(card)} wants to run {card.tool_name}"


def outcome_line(outcome: CardOutcome) -> str:
    """E.g. "Approved by alice at 2025-01-01 12:00 UTC"."""
    words = [STATUS_TITLES[outcome.status]]
    if outcome.decided_by:
        words.append(f"by {outcome.decided_by}")
    if outcome.decided_at:
        words.append(f"at {format_time(outcome.decided_at)}")
    return " ".join(words)


def button_label(outcome: CardOutcome) -> str:
    """A short label that stands where the buttons were (WeCom's ``replace_name``)."""
    if outcome.decided_by and outcome.status in ("approved", "rejected"):
        return f"{STATUS_TITLES[outcome.status]} by {outcome.decided_by}"
    return STATUS_TITLES[outcome.status]
