"""`RunResult`: what a finished (or stopped) run gives back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hookgate.engines.state import RunState


@dataclass(slots=True)
class RunResult:
    """Status, answer and the trace of every event; tool events carry the hook decisions."""

    run_id: str
    status: str
    answer: str | None
    trace: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    state: RunState | None = None

    @classmethod
    def from_state(cls, state: RunState) -> RunResult:
        return cls(
            run_id=state.run_id,
            status=state.status,
            answer=state.answer,
            trace=list(state.trace),
            error=state.error,
            state=state,
        )

    def tool_events(self) -> list[dict[str, Any]]:
        return [e for e in self.trace if e["type"] in ("tool_result", "tool_blocked")]
