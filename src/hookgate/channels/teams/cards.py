"""The Adaptive Cards of a Teams approval: the request with Approve/Reject (Action.Execute,
Universal Actions, schema 1.4) and the decided card that replaces it.

Text that comes from an agent, a model or a user is a ``TextRun`` inside a
``RichTextBlock``, which Teams does not parse as Markdown, so it cannot format or link.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from hookgate.channels import card_text
from hookgate.channels.base import ApprovalCard, CardOutcome
from hookgate.channels.masking import DEFAULT_SECRET_PATTERNS, ArgsLimits, render_args

CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
VERSION = "1.4"
ARGS_LIMITS = ArgsLimits(value_chars=300, budget=3000)
MESSAGE_CHARS = 1000
CONTEXT_CHARS = 400


def _text(text: str, **style: Any) -> dict[str, Any]:
    """Plain text: a RichTextBlock of one TextRun (never parsed as Markdown)."""
    return {"type": "RichTextBlock", "inlines": [{"type": "TextRun", "text": text, **style}]}


def _card(body: list[dict[str, Any]], actions: list[dict[str, Any]]) -> dict[str, Any]:
    card: dict[str, Any] = {"type": "AdaptiveCard", "$schema": SCHEMA, "version": VERSION,
                            "body": body}
    if actions:
        card["actions"] = actions
    return card


def attachment(card: dict[str, Any]) -> dict[str, Any]:
    return {"contentType": CONTENT_TYPE, "content": card}


def approval_card(card: ApprovalCard, *, now: datetime,
                  patterns: Iterable[str]) -> dict[str, Any]:
    facts = [{"title": "Agent", "value": card_text.agent_label(card)}]
    if card.requester:
        facts.append({"title": "Requested by", "value": card.requester})
    facts.append({"title": "Time left", "value": card_text.time_left(card.expires_at, now)})
    body: list[dict[str, Any]] = [
        _text(card_text.title(card), weight="bolder", size="medium"),
        {"type": "FactSet", "facts": facts},
    ]
    context = card_text.context_lines(card, message_chars=MESSAGE_CHARS,
                                      text_chars=CONTEXT_CHARS)
    if context:
        body.append(_text("\n".join(context)))
    args = render_args(card.args, patterns=patterns, limits=ARGS_LIMITS,
                       inbox_url=card.inbox_url)
    body += [_text("Arguments (exactly what will run; secrets masked):", weight="bolder"),
             _text(args, fontType="monospace")]
    actions = [
        {"type": "Action.Execute", "title": "Approve", "verb": "approve", "style": "positive",
         "data": {"request_id": card.request_id}},
        {"type": "Action.Execute", "title": "Reject", "verb": "reject",
         "style": "destructive", "data": {"request_id": card.request_id}},
    ]
    if card.inbox_url:
        actions.append({"type": "Action.OpenUrl", "title": card_text.inbox_link(card),
                        "url": card.inbox_url})
    return _card(body, actions)


def decided_card(outcome: CardOutcome, tool_name: str | None, *,
                 patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS) -> dict[str, Any]:
    """The card after the decision: outcome, who, when, edits, words; no buttons."""
    status = card_text.STATUS_TITLES[outcome.status]
    lines = [card_text.outcome_line(outcome)]
    if outcome.reason:
        lines.append(f"Reason: {outcome.reason}")
    lines += card_text.decision_lines(outcome, text_chars=MESSAGE_CHARS, patterns=patterns)
    lines.append(f"request {outcome.request_id}")
    return _card([_text(f"{status}: {tool_name}" if tool_name else status, weight="bolder",
                        size="medium"),
                  _text("\n".join(lines))], [])


def card_texts(card: dict[str, Any]) -> str:
    """All the text a card shows, joined (for logs and tests)."""
    parts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key in ("text", "title", "value"):
                if isinstance(node.get(key), str):
                    parts.append(node[key])
            for value in node.values():
                if isinstance(value, dict | list):
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(card)
    return "\n".join(parts)
