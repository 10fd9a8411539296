"""What of a run's trace a caller may see: the admin-only texts are for org admins only.

A failed hook's output (``admin_output``) and a tool's error (``admin_error``), both masked
`Withheld` texts, may quote a tool's raw result that a hook withheld or rewrote; members see
that the hook failed and how (the tool failed, and with which exception), not what was said.
This is the one door: every route that returns a run's trace or events calls `for_caller`.
"""

from __future__ import annotations

from typing import Any

from hookgate.hooks.trace import ADMIN_KEYS


def for_caller(value: Any, admin: bool) -> Any:
    """``value`` (an event, or anything in one) as the caller may see it."""
    if admin:
        return value
    return _without_output(value)


def _without_output(value: Any) -> Any:
    # Events nest traces (a delegate's or an agent node's), so look at every depth.
    if isinstance(value, dict):
        return {k: _without_output(v) for k, v in value.items() if k not in ADMIN_KEYS}
    if isinstance(value, list):
        return [_without_output(v) for v in value]
    return value
