"""Durations as people write and read them: a configured duration is seconds or text such
as ``90s``, ``15m``, ``2h``, ``1d`` wherever one is configured, and a time left reads as the
web inbox's countdown does (``57m 21s``) in the CLI too.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def seconds_of(value: Any) -> Any:
    """Seconds from text such as ``15m``; anything else is returned for the field's own
    validation (a number is seconds; bounds are the field's)."""
    if not isinstance(value, str):
        return value
    found = _DURATION.fullmatch(value)
    if found is None:
        raise ValueError(f"a duration is seconds or text such as 90s, 15m, 2h or 1d, "
                         f"not {value!r}")
    return float(found.group(1)) * _UNIT_S[found.group(2)]


#: A configured duration in seconds, given as a number or as text (``5m``).
Seconds = Annotated[float, BeforeValidator(seconds_of)]


def duration_text(total_seconds: float) -> str:
    """A duration as the web inbox's countdown reads it (``duration`` in
    server/static/app.js): ``2d 3h``, ``1h 05m``, ``57m 21s``, ``9s``; whole seconds,
    never negative."""
    s = max(0, math.floor(total_seconds)) if math.isfinite(total_seconds) else 0
    days, hours, minutes = s // 86400, s % 86400 // 3600, s % 3600 // 60
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {s % 60:02d}s"
    return f"{s % 60}s"


def count_text(count: int, singular: str, plural: str | None = None) -> str:
    """``1 time``, ``2 times``: a count with its noun."""
    return f"{count} {singular if count == 1 else (plural or singular + 's')}"
