"""Slack Block Kit for an approval request and for its outcome.

Text that comes from the agent, the model or a user goes into ``plain_text`` objects, which
Slack does not parse, so it cannot ping ``@channel`` or forge links.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from hookgate.channels import card_text
from hookgate.channels.base import ApprovalCard, CardOutcome
from hookgate.channels.masking import DEFAULT_SECRET_PATTERNS, ArgsLimits, render_args

#: A section's text holds at most 3000 characters; leave room for the label and marker.
ARGS_LIMITS = ArgsLimits(value_chars=300, budget=2400)
HEADER_MAX_CHARS = 150
#: The context section shares the same 3000-character limit.
SECTION_CHARS = 3000
MESSAGE_CHARS = 1000
CONTEXT_CHARS = 400


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}


def _header(text: str) -> dict[str, Any]:
    if len(text) > HEADER_MAX_CHARS:
        text = text[: HEADER_MAX_CHARS - 1] + "…"
    return {"type": "header", "text": _plain(text)}


def _button(card: ApprovalCard, decision: str, label: str, style: str) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": decision,
        "value": card.request_id,
        "style": style,
        "text": _plain(label),
    }


def approval_text(card: ApprovalCard) -> str:
    """The notification/fallback text of the approval message."""
    return f"{card_text.title(card)} ({card_text.summary(card)})"


def approval_blocks(
    card: ApprovalCard, *, now: datetime, patterns: Iterable[str]
) -> list[dict[str, Any]]:
    facts = [f"Agent: {card_text.agent_label(card)}"]
    if card.requester:
        facts.append(f"Requested by: {card.requester}")
    facts.append(f"Time left: {card_text.time_left(card.expires_at, now)}")
    args = render_args(card.args, patterns=patterns, limits=ARGS_LIMITS, inbox_url=card.inbox_url)
    blocks: list[dict[str, Any]] = [
        _header(card_text.title(card)),
        {"type": "section", "text": _plain("\n".join(facts))},
    ]
    context = card_text.context_lines(card, message_chars=MESSAGE_CHARS,
                                      text_chars=CONTEXT_CHARS)
    if context:
        blocks.append({"type": "section",
                       "text": _plain(card_text.clip("\n".join(context), SECTION_CHARS))})
    blocks += [
        {
            "type": "section",
            "text": _plain(f"Arguments (exactly what will run; secrets masked):\n{args}"),
        },
    ]
    if card.inbox_url:
        link = f"<{card.inbox_url}|{card_text.inbox_link(card)}>"
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": link}]})
    blocks.append(
        {
            "type": "actions",
            "block_id": f"approval_{card.request_id}",
            "elements": [
                _button(card, "approve", "Approve", "primary"),
                _button(card, "reject", "Reject", "danger"),
            ],
        }
    )
    return blocks


def decided_text(outcome: CardOutcome, tool_name: str | None) -> str:
    what = f"{tool_name} (request {outcome.request_id})" if tool_name else (
        f"request {outcome.request_id}"
    )
    return f"{card_text.outcome_line(outcome)}: {what}"


def decided_blocks(outcome: CardOutcome, tool_name: str | None, *,
                   patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS) -> list[dict[str, Any]]:
    """The message after the decision: outcome, who, when, what was edited and the words
    to the model; no buttons."""
    status = card_text.STATUS_TITLES[outcome.status]
    lines = [card_text.outcome_line(outcome)]
    if outcome.reason:
        lines.append(f"Reason: {outcome.reason}")
    lines += card_text.decision_lines(outcome, text_chars=MESSAGE_CHARS, patterns=patterns)
    return [
        _header(f"{status}: {tool_name}" if tool_name else status),
        {"type": "section", "block_id": f"decided_{outcome.request_id}",
         "text": _plain("\n".join(lines))},
        {"type": "context", "elements": [_plain(f"request {outcome.request_id}")]},
    ]
