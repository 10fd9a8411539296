"""The content and buttons of a Discord approval message, and of its decided form.

Discord parses Markdown in message content, so everything an agent, a model or a user wrote
goes inside one code block (which Discord shows as is); mentions are switched off with
``allowed_mentions``. A message holds at most 2000 characters.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from hookgate.channels import card_text
from hookgate.channels.base import ApprovalCard, CardOutcome
from hookgate.channels.masking import DEFAULT_SECRET_PATTERNS, ArgsLimits, render_args

CONTENT_CHARS = 2000
ARGS_LIMITS = ArgsLimits(value_chars=200, budget=900)
CONTEXT_CHARS = 200
FENCE = "```"
#: Button styles: 3 success (green), 4 danger (red).
SUCCESS, DANGER = 3, 4
NO_MENTIONS: dict[str, Any] = {"parse": []}
PREFIX = "hookgate"


def _block(text: str, room: int) -> str:
    """``text`` in a code block nothing inside can close."""
    safe = text.replace(FENCE, "`\u200b``")
    return f"{FENCE}\n{card_text.clip(safe, room)}\n{FENCE}"


def custom_id(decision: str, request_id: str) -> str:
    return f"{PREFIX}:{decision}:{request_id}"


def parse_custom_id(value: str) -> tuple[str, str] | None:
    """(decision, request id) of an approval button's custom_id."""
    prefix, _, rest = value.partition(":")
    decision, _, request_id = rest.partition(":")
    if prefix != PREFIX or decision not in ("approve", "reject") or not request_id:
        return None
    return decision, request_id


def approval_content(card: ApprovalCard, *, now: datetime, patterns: Iterable[str]) -> str:
    lines = [card_text.title(card), f"Agent: {card_text.agent_label(card)}"]
    if card.requester:
        lines.append(f"Requested by: {card.requester}")
    lines.append(f"Time left: {card_text.time_left(card.expires_at, now)}")
    lines += card_text.context_lines(card, message_chars=CONTEXT_CHARS,
                                     text_chars=CONTEXT_CHARS)
    lines += ["", "Arguments (exactly what will run; secrets masked):",
              render_args(card.args, patterns=patterns, limits=ARGS_LIMITS,
                          inbox_url=card.inbox_url)]
    link = f"\n{card_text.inbox_link(card)}: <{card.inbox_url}>" if card.inbox_url else ""
    room = CONTENT_CHARS - len(link) - 2 * len(FENCE) - 4
    return _block("\n".join(lines), room) + link


def buttons(request_id: str) -> list[dict[str, Any]]:
    """One action row with Approve and Reject."""
    return [{"type": 1, "components": [
        {"type": 2, "style": SUCCESS, "label": "Approve",
         "custom_id": custom_id("approve", request_id)},
        {"type": 2, "style": DANGER, "label": "Reject",
         "custom_id": custom_id("reject", request_id)}]}]


def decided_content(outcome: CardOutcome, tool_name: str | None, *,
                    patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS) -> str:
    status = card_text.STATUS_TITLES[outcome.status]
    lines = [f"{status}: {tool_name}" if tool_name else status,
             card_text.outcome_line(outcome)]
    if outcome.reason:
        lines.append(f"Reason: {outcome.reason}")
    lines += card_text.decision_lines(outcome, text_chars=600, patterns=patterns)
    lines.append(f"request {outcome.request_id}")
    return _block("\n".join(lines), CONTENT_CHARS - 2 * len(FENCE) - 4)
