"""Turning what crosses hookgate into attribute values that are safe to export.

A model can send any text (lone surrogates, megabytes, 300-deep JSON); an exporter that
meets a string it cannot encode drops the whole batch. So every text is made valid UTF-8
and bounded here, and captured arguments are masked like an approval card's.
"""

from __future__ import annotations

import json
from typing import Any

from hookgate.hooks.withheld import secret_patterns, shown_args
from hookgate.telemetry.switch import SWITCH

#: Longest name-like value (tool, hook, call id) put on a span.
NAME_CHARS = 200
#: Longest free text (a block reason, an error message) put on a span.
TEXT_CHARS = 2000
#: Longest captured content (arguments, result) put on a span.
CONTENT_CHARS = 16_000


def text(value: object, limit: int = TEXT_CHARS) -> str:
    """``value`` as valid UTF-8 text of at most ``limit`` characters (cut ones say so)."""
    s = value if isinstance(value, str) else str(value)
    if len(s) > limit:
        s = s[:limit] + f"… [cut, {len(s)} chars]"
    return s.encode("utf-8", "replace").decode("utf-8")


def name(value: object) -> str:
    return text(value, NAME_CHARS)


def masked_arguments(args: Any) -> str:
    """Tool arguments as JSON with every secret-looking key masked, bounded."""
    try:
        shown = shown_args(args, patterns=secret_patterns(SWITCH.mask_patterns))
        rendered = json.dumps(shown, ensure_ascii=False, default=str)
    except RecursionError:
        # Never fall back to the unmasked value: say what was left out instead.
        return "[arguments nested too deeply to show]"
    except (TypeError, ValueError):
        return "[arguments that cannot be shown as JSON]"
    return text(rendered, CONTENT_CHARS)


def content(value: str) -> str:
    return text(value, CONTENT_CHARS)
