"""How a tool call's arguments appear on an approval card: secrets masked, long values cut.

A card is seen by everyone in the chat, so any key that looks like a secret is masked at
any depth, and the text is bounded; whatever is cut says so and points to the inbox, where
the approver can read the exact arguments. The masking itself (``mask_secrets``,
``mask_text``, the patterns) is owned by hookgate.hooks.withheld and re-exported here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hookgate.hooks.withheld import (
    DEFAULT_SECRET_PATTERNS,
    MASK,
    is_secret_key,
    is_secret_path,
    mask_secrets,
    mask_text,
    secret_patterns,
    shown_args,
)

__all__ = ["DEFAULT_SECRET_PATTERNS", "MASK", "ArgsLimits", "cut_marker", "is_secret_key",
           "is_secret_path", "mask_secrets", "mask_text", "render_args", "secret_patterns"]


@dataclass(frozen=True, slots=True)
class ArgsLimits:
    """How much of the arguments a card may show.

    ``value_chars``: the longest single value shown whole; ``budget``: the whole rendering.
    """

    value_chars: int = 300
    budget: int = 3000
    indent: int | None = 2


def cut_marker(total_chars: int, inbox_url: str | None) -> str:
    where = f"see the inbox: {inbox_url}" if inbox_url else "see the inbox"
    return f"… [cut, {total_chars} chars in all — {where}]"


def render_args(
    args: Mapping[str, Any],
    *,
    patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS,
    limits: ArgsLimits = ArgsLimits(),
    inbox_url: str | None = None,
) -> str:
    """The arguments as JSON text for a card: masked, each long value cut, within budget."""
    shown = _cut_long_values(shown_args(args, patterns=patterns), limits.value_chars,
                             inbox_url)
    separators = (",", ": ") if limits.indent is not None else (", ", ": ")
    # allow_nan=False: a card never shows "NaN" or "Infinity" (the arguments' boundary
    # refuses them; should one get here, delivery fails and the request is cancelled).
    text = json.dumps(
        shown, indent=limits.indent, ensure_ascii=False, default=str, separators=separators,
        allow_nan=False,
    )
    if len(text) <= limits.budget:
        return text
    return text[: limits.budget] + "\n" + cut_marker(len(text), inbox_url)


def _cut_long_values(value: Any, limit: int, inbox_url: str | None) -> Any:
    if isinstance(value, dict):
        return {k: _cut_long_values(v, limit, inbox_url) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut_long_values(item, limit, inbox_url) for item in value]
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + cut_marker(len(value), inbox_url)
    return value

