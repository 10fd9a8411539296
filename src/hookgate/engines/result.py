"""`RunResult`: what a finished (or stopped, or parked) run gives back.

A run that waits for a person ends its `run()` with ``status == "awaiting_approval"`` and
``pending``: one `PendingApproval` per request nobody has decided yet (its arguments
masked), so a caller needs no exception to know what the run waits for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hookgate.engines.state import RunState, RunStatus
from hookgate.hooks.withheld import shown_args


@dataclass(slots=True, frozen=True)
class PendingApproval:
    """A call of the run that waits for a person's decision.

    ``args``: the arguments that will run once approved, secrets masked. ``approver_scope``:
    who may decide (``initiator``, ``agent_owner``, ``org_members``; None: not stated).
    ``run_id``: the child run the call belongs to (a delegate's), else the run's own.
    """

    request_id: str
    tool_call_id: str | None
    tool_name: str | None
    args: Any
    approver_scope: str | None
    expires_at: str | None
    run_id: str | None = None

    @classmethod
    def of_event(cls, event: dict[str, Any]) -> PendingApproval:
        """The pending approval a ``confirmation_pending`` trace event announces."""
        def text(key: str) -> str | None:
            value = event.get(key)
            return None if value is None else str(value)
        return cls(request_id=str(event["request_id"]), tool_call_id=text("tool_call_id"),
                   tool_name=text("tool_name"), args=shown_args(event.get("args")),
                   approver_scope=text("approver_scope"), expires_at=text("expires_at"),
                   run_id=text("child_run_id"))


def pending_approvals(trace: list[dict[str, Any]]) -> list[PendingApproval]:
    """The ``confirmation_pending`` requests of ``trace`` it never saw resolved, one each."""
    resolved = {e.get("request_id") for e in trace if e.get("type") == "confirmation_resolved"}
    seen: dict[str, PendingApproval] = {}
    for e in trace:
        rid = e.get("request_id")
        if (e.get("type") == "confirmation_pending" and isinstance(rid, str)
                and rid not in resolved and rid not in seen):
            seen[rid] = PendingApproval.of_event(e)
    return list(seen.values())


@dataclass(slots=True)
class RunResult:
    """Status, answer and the trace of every event; tool events carry the hook decisions.

    ``pending``: when the run waits for people (``awaiting_approval``), what it waits for.
    """

    run_id: str
    status: RunStatus
    answer: str | None
    trace: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    state: RunState | None = None
    pending: list[PendingApproval] = field(default_factory=list)

    @classmethod
    def from_state(cls, state: RunState) -> RunResult:
        trace = list(state.trace)
        return cls(
            run_id=state.run_id,
            status=state.status,
            answer=state.answer,
            trace=trace,
            error=state.error,
            state=state,
            pending=pending_approvals(trace) if state.status == "awaiting_approval" else [],
        )

    def tool_events(self) -> list[dict[str, Any]]:
        return [e for e in self.trace if e["type"] in ("tool_result", "tool_blocked")]
