"""A run's state as plain data: it round-trips through JSON and resumes in a fresh engine."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, Field

RunStatus = Literal[
    "running",
    "awaiting_approval",
    "completed",
    "failed",
    "blocked_build",
    "session_blocked",
    "max_steps",
    "cancelled",
]

FINAL_STATUSES: frozenset[str] = frozenset(
    {"completed", "failed", "blocked_build", "session_blocked", "max_steps", "cancelled"}
)


def new_run_id() -> str:
    return "run_" + uuid.uuid4().hex


_NO_TRACE: set[str] = {"trace"}


class RunState(BaseModel):
    """Everything needed to continue a run: the conversation, the turn in flight, the trace.

    ``pending_calls`` is the current model turn's tool calls (as dicts); ``outcomes`` holds
    the calls of that turn that have finished, by tool call id.
    """

    run_id: str = Field(default_factory=new_run_id)
    engine: str = "react"
    agent_id: str
    user_id: str | None = None
    org_id: str | None = None
    conversation_id: str | None = None
    message: str = ""
    status: RunStatus = "running"
    session_started: bool = False
    messages: list[dict[str, Any]] = Field(default_factory=list)
    step: int = 0
    pending_calls: list[dict[str, Any]] = Field(default_factory=list)
    outcomes: dict[str, dict[str, Any]] = Field(default_factory=dict)
    answer: str | None = None
    error: str | None = None
    trace: list[dict[str, Any]] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.status in FINAL_STATUSES

    def to_json(self, *, trace: bool = True) -> str:
        """The state as JSON; ``trace=False`` leaves the trace out (a store that keeps the
        run's events in an event log of their own stores them there only)."""
        return self.model_dump_json() if trace else self.model_dump_json(exclude=_NO_TRACE)

    @classmethod
    def from_json(cls, text: str | bytes) -> RunState:
        return cls.model_validate_json(text)
