"""The approval wording a chat card carries: why a person is asked, the readable numbers and
the approver's edits, prepared here and handed to the channels on the typed card values
(`ApprovalCard`, `CardOutcome`), so a channel lays out text without importing the approvals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hookgate.approvals.context import readable_numbers
from hookgate.approvals.wording import changes_text, numbers_text, reason_texts
from hookgate.channels.base import CardEdit
from hookgate.hooks.withheld import MASK, shown_args, shown_changes


def card_reasons(context: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Why a person is asked, one line per rule that fired (from the request's context)."""
    return tuple(reason_texts(context))


def card_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments a card carries: as anyone may see them (a card is read by everyone in
    the chat), so a channel never holds a raw secret-keyed value; it masks its own
    ``mask_patterns`` on top."""
    return dict(shown_args(args))


def card_numbers(args: Mapping[str, Any]) -> str | None:
    """The arguments' numbers grouped for reading: "amount = 60,000; fee = 1,250.5"."""
    return numbers_text(readable_numbers(args))


def card_edits(changes: list[dict[str, Any]]) -> tuple[CardEdit, ...]:
    """Each change the approver made as a card line: as anyone may see it (secret-keyed
    values masked, at any depth), and with both values masked (for a channel's own
    ``mask_patterns``). A card never carries a raw value under a secret-looking key."""
    return tuple(
        CardEdit(path=str(change["path"]), text=changes_text(shown_changes([change])),
                 masked=changes_text([{**change, "before": MASK, "after": MASK}]))
        for change in changes
    )
