"""How approval requests read to people: the reasons a context gives, the numbers of the
arguments on one line, and the changes an approver made. Plain text from stored (or
API-returned) values; nothing heavy is imported, so `hookgate approvals` and `--help`
load it cheaply (approvals/context.py and approvals/edits.py use it too)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: How much of one changed value the model's note and the cards show.
VALUE_CHARS = 200


def changes_text(found: list[dict[str, Any]]) -> str:
    """``amount: 60000 → 40000; note: added "rush"`` — one line for cards, CLI and model."""
    parts = []
    for change in found:
        if change.get("removed"):
            parts.append(f"{change['path']}: removed (was {value_text(change['before'])})")
        elif change.get("added"):
            parts.append(f"{change['path']}: added {value_text(change['after'])}")
        else:
            parts.append(f"{change['path']}: {value_text(change['before'])} → "
                         f"{value_text(change['after'])}")
    return "; ".join(parts)


def numbers_text(numbers: list[dict[str, str]]) -> str | None:
    """``readable_numbers`` as one line: "amount = 60,000; fee = 1,250.5"."""
    return "; ".join(f"{n['path']} = {n['text']}" for n in numbers) or None


def reason_texts(context: Mapping[str, Any] | None) -> list[str]:
    """The words of each reason of a stored (or API-returned) context, in order."""
    found = (context or {}).get("reasons") or []
    return [str(r["text"]) for r in found if isinstance(r, Mapping) and r.get("text")]


def value_text(value: Any) -> str:
    """A value as JSON text, cut to VALUE_CHARS."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"
