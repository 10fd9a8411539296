"""Values that cross the guarded path: a requested call, who asks, and what came of it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from hookgate.hooks.approval import CallBinding, CallDecision
from hookgate.hooks.model import EventEmitter
from hookgate.hooks.trace import ADMIN_ERROR_KEY
from hookgate.hooks.withheld import Withheld

#: ``external``: a tool that runs outside hookgate (Claude Code's), decided here.
ExecutionPath = Literal["react", "dag", "delegate", "workflow", "eval", "mcp", "external"]
__all__ = ["CallBinding", "CallDecision", "CallIdentity", "ExecutionPath", "OutcomeStatus",
           "ToolCall", "ToolOutcome"]

OutcomeStatus = Literal["ok", "blocked", "invalid", "error", "withheld", "unknown_tool"]


@dataclass(slots=True)
class ToolCall:
    """A tool call as the model asked for it (arguments not yet validated)."""

    id: str
    name: str
    args: Any

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "args": self.args}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        return cls(id=str(data["id"]), name=str(data["name"]), args=data.get("args", {}))


@dataclass(slots=True)
class CallIdentity:
    """Who makes the call and on which path; becomes the hooks' context metadata."""

    agent_id: str
    user_id: str | None
    org_id: str | None
    run_id: str
    conversation_id: str | None = None
    execution_path: ExecutionPath = "react"
    parent_agent_id: str | None = None
    depth: int = 0
    #: A sub-agent's call: the session (on the engines, the run) that delegated to it.
    parent_session: str | None = None
    #: The stored run a child (a delegate, a workflow's agent node) runs inside; None for
    #: the stored run's own calls.
    root_run_id: str | None = None
    require_confirmation_for_all: bool = False
    emit: EventEmitter | None = None
    #: The run's Claude Code-shaped transcript, for hooks that read it (None: not kept).
    transcript_path: str | None = None
    #: The message the run was started with (shown to the approver of a gated call).
    message: str | None = None
    #: Makes what the run holds in memory durable before anything of this call is written
    #: or asked (a hook that runs, an observer of a blocked call); None: nothing to do.
    settle: Callable[[], Awaitable[None]] | None = None
    #: The session whose facts (request, results seen) this call shares, when it is not
    #: ``root_run_id or run_id`` (an outside agent's sub-agent: its root session's run).
    facts_session: str | None = None


@dataclass(slots=True)
class ToolOutcome:
    """What one guarded call came to; ``observation`` is exactly what the model is shown.

    ``error`` of a tool that raised is a `Withheld`: its text may quote what a PostToolUse
    hook rewrote away, so a dict gets the fixed words and admins the text (``admin_error``).
    """

    tool_call_id: str
    tool_name: str
    args: Any
    allowed: bool
    status: OutcomeStatus
    observation: str
    error: str | Withheld | None = None
    side_effects: list[str] = field(default_factory=list)
    hooks: list[dict[str, Any]] = field(default_factory=list)
    blocked_by: str | None = None
    #: Set when a hook stopped the whole run (Claude Code's ``continue: false``): why.
    stop_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "args": self.args,
            "allowed": self.allowed,
            "status": self.status,
            "observation": self.observation,
            "error": None if self.error is None else str(self.error),
            "side_effects": list(self.side_effects),
            "hooks": list(self.hooks),
            "blocked_by": self.blocked_by,
            "reason": self.reason,
            "stop_reason": self.stop_reason,
        }
        if isinstance(self.error, Withheld):
            out[ADMIN_ERROR_KEY] = self.error.admin_text()
        return out

    @property
    def reason(self) -> str | None:
        """A block's reason for people, without the "Blocked by hook 'x':" (or "Blocked:")
        that ``error`` starts with for the model; whoever shows it names the hook itself."""
        if self.status != "blocked" or self.error is None:
            return None
        text = str(self.error).strip()
        for prefix in (f"Blocked by hook '{self.blocked_by}'", "Blocked:",
                       f"hook '{self.blocked_by}':"):
            if text.startswith(prefix):
                text = text[len(prefix):].lstrip(":. ").strip()
        return text or "no reason given"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolOutcome:
        error = data.get("error")
        if error is not None and data.get(ADMIN_ERROR_KEY) is not None:
            error = Withheld.of(str(data[ADMIN_ERROR_KEY]), shown=str(error))
        return cls(
            tool_call_id=data["tool_call_id"],
            tool_name=data["tool_name"],
            args=data.get("args"),
            allowed=bool(data["allowed"]),
            status=data["status"],
            observation=data["observation"],
            error=error,
            side_effects=list(data.get("side_effects") or []),
            hooks=list(data.get("hooks") or []),
            blocked_by=data.get("blocked_by"),
            stop_reason=data.get("stop_reason"),
        )
