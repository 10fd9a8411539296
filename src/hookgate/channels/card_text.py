"""The words every platform's approval card uses, so the three read alike.

The approval wording on a card (why a person is asked, the readable numbers, the approver's
edits) is prepared by the approvals (hookgate.approvals.card_text) and arrives on the
`ApprovalCard` and `CardOutcome` values; this module only lays it out.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from hookgate.channels.base import ApprovalCard, CardOutcome
from hookgate.channels.masking import DEFAULT_SECRET_PATTERNS, is_secret_path

#: The words of a card's link to the request in the inbox, where the arguments can be
#: edited before approving (no platform card has a form that could hold them safely).
INBOX_LINK = "Open in the inbox (to approve with edited arguments)"
#: The link of a card whose arguments cannot be edited (a Claude Code or MCP call).
INBOX_LINK_PLAIN = "Open in the inbox"


def inbox_link(card: ApprovalCard) -> str:
    """The inbox link's words: it offers edits only where an edit can succeed."""
    return INBOX_LINK if card.editable else INBOX_LINK_PLAIN

#: Where a decision came from, as the record names it.
VIA_TITLES = {
    "inbox": "the web inbox",
    "api": "the API",
    "cli": "the CLI",
    "feishu": "Feishu",
    "slack": "Slack",
    "wecom": "WeCom",
    "telegram": "Telegram",
    "teams": "Teams",
    "discord": "Discord",
    "email": "email",
    "ntfy": "ntfy",
    "timeout": "the timeout fallback",
}

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
    if outcome.via:
        words.append(f"via {VIA_TITLES.get(outcome.via, outcome.via)}")
    if outcome.decided_at:
        words.append(f"at {format_time(outcome.decided_at)}")
    return " ".join(words)


def button_label(outcome: CardOutcome) -> str:
    """A short label that stands where the buttons were (WeCom's ``replace_name``)."""
    if outcome.decided_by and outcome.status in ("approved", "rejected"):
        via = f" ({outcome.via})" if outcome.via else ""
        return f"{STATUS_TITLES[outcome.status]} by {outcome.decided_by}{via}"
    return STATUS_TITLES[outcome.status]


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def user_message(card: ApprovalCard) -> str | None:
    message = (card.context or {}).get("user_message")
    return message if isinstance(message, str) and message else None


def tool_description(card: ApprovalCard) -> str | None:
    text = (card.context or {}).get("tool_description")
    return text if isinstance(text, str) and text else None


def coding_agent(card: ApprovalCard) -> str | None:
    """E.g. "Codex in /work/repo": which coding agent asked, in which working folder."""
    held = (card.context or {}).get("coding_agent")
    if not isinstance(held, dict) or not isinstance(held.get("name"), str):
        return None
    folder = held.get("cwd")
    return f"{held['name']} in {folder}" if isinstance(folder, str) and folder \
        else str(held["name"])


def escalation(card: ApprovalCard) -> str | None:
    """On an escalation card: since when nobody decided, and who may decide now."""
    note = (card.context or {}).get("escalation")
    return note if isinstance(note, str) and note else None


def reasons(card: ApprovalCard) -> list[str]:
    """Why a person is asked, one line per rule that fired."""
    return list(card.reasons)


def numbers_line(card: ApprovalCard) -> str | None:
    """E.g. "amount = 60,000; fee = 1,250.5" (the exact arguments are shown beside it)."""
    return card.numbers


def context_lines(card: ApprovalCard, *, message_chars: int, text_chars: int) -> list[str]:
    """The approver's context as lines of plain text, each cut to the card's room."""
    lines = []
    note = escalation(card)
    if note:
        lines.append(clip(note, text_chars))
    coding = coding_agent(card)
    if coding:
        lines.append("Coding agent: " + clip(coding, text_chars))
    message = user_message(card)
    if message:
        lines.append("User asked: " + clip(message, message_chars))
    description = tool_description(card)
    if description:
        lines.append("What the tool does: " + clip(description, text_chars))
    for reason in reasons(card):
        lines.append("Why approval is needed: " + clip(reason, text_chars))
    numbers = numbers_line(card)
    if numbers:
        lines.append("Numbers: " + clip(numbers, text_chars))
    return lines


#: The longest edit or message line of a follow-up notice (WeCom's text messages).
NOTICE_CHARS = 1500


def decision_lines(outcome: CardOutcome, *, text_chars: int,
                   patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS) -> list[str]:
    """What the approver changed (secret-looking values masked) and their words to the
    model, as lines for a decided card; [] for a plain decision."""
    lines = []
    if outcome.edits:
        pats = tuple(patterns)
        shown = [edit.masked if is_secret_path(edit.path, pats) else edit.text
                 for edit in outcome.edits]
        lines.append("Approved with edits: " + clip("; ".join(shown), text_chars))
    if outcome.message:
        lines.append("Message to the agent: " + clip(outcome.message, text_chars))
    return lines
