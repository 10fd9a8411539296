"""What of a run's trace a caller may see: a failed hook's output is for org admins only.

The output (``admin_output``, already masked) may quote a tool's raw result that a hook
withheld from the model; members see that the hook failed and how, not what it printed.
"""

from __future__ import annotations

from typing import Any

from hookgate.hooks.trace import ADMIN_OUTPUT_KEY


def for_caller(value: Any, admin: bool) -> Any:
    """``value`` (an event, or anything in one) as the caller may see it."""
    if admin:
        return value
    return _without_output(value)


def _without_output(value: Any) -> Any:
    # Events nest traces (a delegate's or an agent node's), so look at every depth.
    if isinstance(value, dict):
        return {k: _without_output(v) for k, v in value.items() if k != ADMIN_OUTPUT_KEY}
    if isinstance(value, list):
        return [_without_output(v) for v in value]
    return value
