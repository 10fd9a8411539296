"""What a request's run already did: its earlier finished tool calls, for the approver.

An approver deciding "pay 60,000 to ACME" should see that the same run already paid 12,000
to ACME. Callers reach this only through a request they may see (routes/confirmations.py's
`_visible`); the events pass through `trace_view.for_caller` like every other trace read.
"""

from __future__ import annotations

from typing import Any

from hookgate.approvals.records import ConfirmationRequest
from hookgate.engines.state import RunState
from hookgate.runtime.runtime import Caller, Runtime
from hookgate.server.trace_view import for_caller

#: The most earlier calls one request shows (the newest ones); a run with more says so.
LIMIT = 50

_FINISHED = ("tool_result", "tool_blocked")


async def run_history(request: ConfirmationRequest, caller: Caller,
                      rt: Runtime) -> dict[str, Any]:
    """``{"calls": [...], "more": n}``: the run's finished calls other than this request's
    own, oldest first, each with how its approval went (a person, a standing rule, none)."""
    run_id = request.stored_run_id  # a delegated child's calls are on its root run
    seen = await rt.runs.store.summary(run_id, with_log=run_id not in rt.runs.bus.feeds)
    if seen is None or seen.org_id != request.org_id:
        return {"calls": [], "more": 0}
    trace = await rt.runs.trace(run_id, RunState.from_json(seen.state_json), seen.logged)
    return for_caller(summarise(trace, request.tool_call_id), caller.admin)  # type: ignore[no-any-return]


def summarise(trace: list[dict[str, Any]], own_call_id: str) -> dict[str, Any]:
    """The finished calls of ``trace`` except ``own_call_id``, newest ``LIMIT`` of them."""
    approvals: dict[str, dict[str, Any]] = {}
    for event in trace:
        if event.get("type") == "confirmation_resolved" and event.get("tool_call_id"):
            approvals[str(event["tool_call_id"])] = event
    calls = []
    for event in trace:
        if event.get("type") not in _FINISHED or event.get("tool_call_id") == own_call_id:
            continue
        approval = approvals.get(str(event.get("tool_call_id")))
        calls.append({
            "tool_call_id": event.get("tool_call_id"),
            "tool_name": event.get("tool_name"),
            "args": event.get("args"),
            "status": event.get("status"),
            "allowed": event.get("allowed"),
            "reason": event.get("reason"),
            "approval": None if approval is None else {
                "status": approval.get("status"),
                "decided_by": approval.get("decided_by"),
                "rule_id": approval.get("rule_id"),
                "request_id": approval.get("request_id"),
            },
        })
    return {"calls": calls[-LIMIT:], "more": max(0, len(calls) - LIMIT)}
