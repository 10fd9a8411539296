"""What an approval decided about one call, as a typed value of the hook context.

The approval gate sets `HookContext.approval`; the guarded path, the audit log and Claude
Code's endpoint read it. The ``metadata`` keys that once carried it are read-only views.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True, frozen=True)
class CallBinding:
    """One call as an approval names it: this run (an external agent's session), this call
    id, this tool, this agent, these exact arguments (their digest) and this org. Whether an
    approval covers a call is decided by `hookgate.hooks.coverage.coverage` alone."""

    run_id: str
    tool_call_id: str
    tool_name: str
    agent_id: str
    args_sha256: str
    #: The org the call is made in (None: a library run without one).
    org_id: str | None = None


@dataclass(slots=True, frozen=True)
class CallDecision:
    """Who decided a call that needed approval, as the audit log records it: the approver (a
    user id, or ``rule ar_… (created by alice)``), the request it waited on (None when a
    standing rule decided) and how long that request waited, in µs (None: nobody waited)."""

    approver: str | None
    request_id: str | None
    wait_us: int | None


@dataclass(slots=True, frozen=True)
class ApprovalOutcome:
    """The approval decision on one call.

    ``status``: the request's status (``approved``, ``rejected``, ``expired``,
    ``cancelled``). ``binding``: the exact call that may run (None: nothing was approved);
    ``decision``: who decided, for the audit log (None: the decision was not about this
    call); ``rule``: "approved by rule R, created by alice" when a standing rule decided;
    ``edited_args``: the arguments the approver changed the call to; ``decided_at``:
    ``time.perf_counter()`` when the decision came (the tool's time is timed from it).
    """

    status: str
    request_id: str | None = None
    binding: CallBinding | None = None
    decision: CallDecision | None = None
    reason: str | None = None
    rule: str | None = None
    edited_args: Mapping[str, Any] | None = None
    decided_at: float | None = None

    @property
    def approver(self) -> str | None:
        """Who decided (a user id, or the rule's words), when the decision was this call's."""
        return None if self.decision is None else self.decision.approver


@dataclass(slots=True, frozen=True)
class AskedBy:
    """A declarative hook that answered ``ask``: its name and reason (shown to the approver)."""

    hook: str
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"hook": self.hook, "reason": self.reason}
