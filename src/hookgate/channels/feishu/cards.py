"""Feishu card JSON 2.0 for an approval request and for its outcome.

Text that comes from the agent, the model or a user (tool name, arguments, names) is only
ever placed in ``plain_text``, never in ``markdown``, so it cannot @-mention the chat, inject
links or fake the layout.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from hookgate.channels import card_text
from hookgate.channels.base import ApprovalCard, CardOutcome
from hookgate.channels.masking import DEFAULT_SECRET_PATTERNS, ArgsLimits, render_args

#: Feishu refuses cards over 30 KB; the arguments get a good part of that, not all.
ARGS_LIMITS = ArgsLimits(value_chars=500, budget=6000)
#: The context (user's message, tool description, reasons) gets a bounded share too.
MESSAGE_CHARS = 1000
CONTEXT_CHARS = 500

OUTCOME_TEMPLATES = {
    "approved": "green",
    "rejected": "red",
    "expired": "grey",
    "cancelled": "grey",
}


def _plain(text: str) -> dict[str, Any]:
    return {"tag": "div", "text": {"tag": "plain_text", "content": text}}


def _header(title: str, subtitle: str, template: str) -> dict[str, Any]:
    return {
        "title": {"tag": "plain_text", "content": title},
        "subtitle": {"tag": "plain_text", "content": subtitle},
        "template": template,
    }


def _card(header: dict[str, Any], elements: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "schema": "2.0",
        "config": {"update_multi": True, "width_mode": "default"},
        "header": header,
        "body": {"elements": elements},
    }


def _button(card: ApprovalCard, decision: str, label: str, style: str) -> dict[str, Any]:
    # "tool" rides along so the decided card sent in the click's reply can name it.
    value = {"req": card.request_id, "decision": decision, "tool": card.tool_name[:64]}
    return {
        "tag": "button",
        "text": {"tag": "plain_text", "content": label},
        "type": style,
        "element_id": f"{decision}_btn",
        "behaviors": [{"type": "callback", "value": value}],
    }


def approval_card(
    card: ApprovalCard, *, now: datetime, patterns: Iterable[str]
) -> dict[str, Any]:
    facts = [f"Tool: {card.tool_name}", f"Agent: {card_text.agent_label(card)}"]
    if card.requester:
        facts.append(f"Requested by: {card.requester}")
    facts.append(f"Time left: {card_text.time_left(card.expires_at, now)}")
    args = render_args(card.args, patterns=patterns, limits=ARGS_LIMITS, inbox_url=card.inbox_url)
    elements = [_plain("\n".join(facts))]
    context = card_text.context_lines(card, message_chars=MESSAGE_CHARS,
                                      text_chars=CONTEXT_CHARS)
    if context:
        elements.append(_plain("\n".join(context)))
    elements += [
        {"tag": "markdown", "content": "**Arguments** (exactly what will run; secrets masked)"},
        _plain(args),
    ]
    if card.inbox_url:
        elements.append({"tag": "markdown",
                         "content": f"[{card_text.inbox_link(card)}]({card.inbox_url})"})
    elements.append(
        {
            "tag": "column_set",
            "columns": [
                {"tag": "column", "elements": [_button(card, "approve", "Approve",
                                                       "primary_filled")]},
                {"tag": "column", "elements": [_button(card, "reject", "Reject", "danger")]},
            ],
        }
    )
    return _card(_header(card_text.title(card), card_text.summary(card), "orange"), elements)


def decided_card(outcome: CardOutcome, tool_name: str | None = None, *,
                 patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS) -> dict[str, Any]:
    """The card after the decision: outcome, who, when, what was edited and the words to
    the model; no buttons."""
    status = card_text.STATUS_TITLES[outcome.status]
    lines = [card_text.outcome_line(outcome)]
    if outcome.reason:
        lines.append(f"Reason: {outcome.reason}")
    lines += card_text.decision_lines(outcome, text_chars=MESSAGE_CHARS, patterns=patterns)
    lines.append(f"Request: {outcome.request_id}")
    title = f"{status}: {tool_name}" if tool_name else status
    header = _header(title, f"request {outcome.request_id}", OUTCOME_TEMPLATES[outcome.status])
    return _card(header, [_plain("\n".join(lines))])
