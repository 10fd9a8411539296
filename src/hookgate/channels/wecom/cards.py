"""WeCom ``template_card`` (button_interaction) for an approval request.

WeCom cards are small (its docs suggest ~36 characters for a title and ~112 for the
sub-title text; the client clips beyond that; at most 6 horizontal rows), so the arguments
are shown briefly, with an explicit cut marker, and the card links to the inbox for the full
text. The context is cut to fit: the user's message as the title's sub-line, why approval is
needed as a row, large numbers after the arguments when they fit.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from hookgate.channels import card_text
from hookgate.channels.base import ApprovalCard
from hookgate.channels.masking import ArgsLimits, render_args

ARGS_LIMITS = ArgsLimits(value_chars=60, budget=112, indent=None)
TITLE_CHARS = 36
DESC_CHARS = 44
KEYNAME_CHARS = 5
VALUE_CHARS = 26
SUB_TITLE_CHARS = 112
TASK_ID_MAX_BYTES = 128
Decision = Literal["approve", "reject"]
_NOT_TASK_ID_CHAR = re.compile(r"[^0-9A-Za-z_\-@]")


def task_id(request_id: str) -> str:
    """``req_<id>`` in WeCom's task_id alphabet; ids that needed changing get a hash suffix
    so two different ids never share a task_id."""
    clean = _NOT_TASK_ID_CHAR.sub("_", request_id)
    if clean == request_id and len(clean) + 4 <= TASK_ID_MAX_BYTES:
        return f"req_{clean}"
    digest = hashlib.sha256(request_id.encode()).hexdigest()[:16]
    return f"req_{clean[: TASK_ID_MAX_BYTES - 4 - 17]}_{digest}"


def button_key(decision: str, request_id: str) -> str:
    return f"{decision}:{request_id}"


def parse_button_key(key: str) -> tuple[Decision, str] | None:
    """(decision, request id) from an approval button's key, or None for any other key."""
    decision, sep, request_id = key.partition(":")
    if not sep or not request_id:
        return None
    if decision == "approve":
        return "approve", request_id
    if decision == "reject":
        return "reject", request_id
    return None


_clip = card_text.clip


def _row(name: str, value: str) -> dict[str, Any]:
    return {"keyname": _clip(name, KEYNAME_CHARS), "value": _clip(value, VALUE_CHARS)}


def _sub_title(card: ApprovalCard, patterns: Iterable[str]) -> str:
    # The exact (masked) arguments first; the grouped numbers only when both fit.
    args = render_args(card.args, patterns=patterns, limits=ARGS_LIMITS)
    numbers = card_text.numbers_line(card)
    if numbers and len(args) + 1 + len(numbers) <= SUB_TITLE_CHARS:
        return f"{args}\n{numbers}"
    return args


def approval_card(
    card: ApprovalCard, *, now: datetime, patterns: Iterable[str]
) -> dict[str, Any]:
    rows = [_row("Tool", card.tool_name), _row("Agent", card_text.agent_label(card))]
    if card.requester:
        rows.append(_row("By", card.requester))
    why = card_text.reasons(card)
    if why:
        rows.append(_row("Why", "; ".join(why)))
    rows.append(_row("Left", card_text.remaining(card.expires_at, now)))
    if card.inbox_url:
        rows.append({"keyname": "Inbox", "value": "Open to edit" if card.editable else "Open",
                     "type": 1,
                     "url": card.inbox_url})
    message = card_text.user_message(card)
    # Six rows at most: an escalation card says so where the user's message stands.
    note = card_text.escalation(card)
    # A coding agent's call has no user message: which agent, in which folder, stands there.
    desc = note or (f"User asked: {message}" if message else
                    card_text.coding_agent(card) or card_text.summary(card))
    return {
        "card_type": "button_interaction",
        "source": {"desc": "hookgate", "desc_color": 0},
        "main_title": {
            "title": _clip(card_text.title(card), TITLE_CHARS),
            "desc": _clip(desc, DESC_CHARS),
        },
        "sub_title_text": _sub_title(card, patterns),
        "horizontal_content_list": rows,
        "task_id": task_id(card.send_key),
        "button_list": [
            {"type": 0, "text": "Approve", "style": 1,
             "key": button_key("approve", card.request_id)},
            {"type": 0, "text": "Reject", "style": 2,
             "key": button_key("reject", card.request_id)},
        ],
    }
