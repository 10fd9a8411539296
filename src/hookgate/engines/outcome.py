"""What a run came to, in one word, for every place that says it (the CLI's run view and
exit code, the HTTP API's ``outcome``, the portal's badge): a run that completed although a
person did not approve a call, or although a hook stopped one, is not a plain success.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: Tool outcomes in which the call did not do what the model asked: a hook (or the gate)
#: blocked it, or its output was withheld.
STOPPED_STATUSES = frozenset({"blocked", "withheld"})
#: A run that completed although a person did not approve one of its calls.
NOT_APPROVED = "not_approved"
#: A run that completed although a hook blocked a call or withheld its result.
CALL_BLOCKED = "call_blocked"


def stops_a_call(event_type: str, data: Mapping[str, Any]) -> bool:
    """Whether this run event is a tool call a hook blocked or whose output it withheld."""
    return event_type in ("tool_result", "tool_blocked") and (
        event_type == "tool_blocked" or data.get("status") in STOPPED_STATUSES)


def any_call_stopped(trace: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a trace (events as dicts with their ``type``) has a call that was stopped."""
    return any(stops_a_call(str(e.get("type", "")), e) for e in trace)


def run_outcome(status: str, *, not_approved: bool, call_stopped: bool) -> str:
    """The run's status, except a completed run with a call not approved
    (``not_approved``, said first: the gate's block of that call is the refusal) or
    with a call a hook stopped (``call_blocked``)."""
    if status != "completed":
        return status
    if not_approved:
        return NOT_APPROVED
    return CALL_BLOCKED if call_stopped else status
