"""The text and inline keyboard of a Telegram approval message, and of its decided form.

Messages are plain text (no ``parse_mode``), so nothing an agent, a model or a user wrote can
format, link or mention; a message holds at most 4096 characters.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from hookgate.channels import card_text
from hookgate.channels.base import ApprovalCard, CardOutcome
from hookgate.channels.masking import DEFAULT_SECRET_PATTERNS, ArgsLimits, render_args

TEXT_CHARS = 4096
ARGS_LIMITS = ArgsLimits(value_chars=300, budget=2000)
MESSAGE_CHARS = 600
CONTEXT_CHARS = 300
#: An answerCallbackQuery notification holds at most 200 characters.
ANSWER_CHARS = 200


def approval_text(card: ApprovalCard, *, now: datetime, patterns: Iterable[str]) -> str:
    lines = [card_text.title(card), f"Agent: {card_text.agent_label(card)}"]
    if card.requester:
        lines.append(f"Requested by: {card.requester}")
    lines.append(f"Time left: {card_text.time_left(card.expires_at, now)}")
    lines += card_text.context_lines(card, message_chars=MESSAGE_CHARS,
                                     text_chars=CONTEXT_CHARS)
    args = render_args(card.args, patterns=patterns, limits=ARGS_LIMITS,
                       inbox_url=card.inbox_url)
    lines += ["", "Arguments (exactly what will run; secrets masked):", args]
    if card.inbox_url:
        lines += ["", f"{card_text.inbox_link(card)}: {card.inbox_url}"]
    return card_text.clip("\n".join(lines), TEXT_CHARS)


def keyboard(approve_data: str, reject_data: str) -> dict[str, Any]:
    """The InlineKeyboardMarkup with Approve and Reject (callback buttons)."""
    return {"inline_keyboard": [[{"text": "Approve", "callback_data": approve_data},
                                 {"text": "Reject", "callback_data": reject_data}]]}


#: A message with this markup has no buttons left.
NO_BUTTONS: dict[str, Any] = {"inline_keyboard": []}


def decided_text(outcome: CardOutcome, tool_name: str | None, *,
                 patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS) -> str:
    """The message after the decision: outcome, who, when, edits and words to the model."""
    status = card_text.STATUS_TITLES[outcome.status]
    lines = [f"{status}: {tool_name}" if tool_name else status,
             card_text.outcome_line(outcome)]
    if outcome.reason:
        lines.append(f"Reason: {card_text.clip(outcome.reason, MESSAGE_CHARS)}")
    lines += card_text.decision_lines(outcome, text_chars=MESSAGE_CHARS, patterns=patterns)
    lines.append(f"request {outcome.request_id}")
    return card_text.clip("\n".join(lines), TEXT_CHARS)
