"""Run events: what a run's trace and its live stream are made of."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: The event types a stream can carry (SPEC §6), plus engine-specific ones.
EVENT_TYPES: frozenset[str] = frozenset(
    {
        "session_start",
        "model_turn",
        "tool_call",
        "tool_blocked",
        "confirmation_pending",
        "confirmation_resolved",
        "tool_result",
        "answer",
        "error",
        "done",
        "plan",
        "step_skipped",
        "delegate_start",
        "delegate_end",
        "standing_rule_skipped",
    }
)


@dataclass(slots=True)
class RunEvent:
    """One event of a run; ``seq`` numbers them from 1 within the run."""

    type: str
    data: dict[str, Any] = field(default_factory=dict)
    seq: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "seq": self.seq, **self.data}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RunEvent:
        data = {k: v for k, v in raw.items() if k not in ("type", "seq")}
        return cls(type=raw["type"], data=data, seq=int(raw.get("seq", 0)))


EventSink = Callable[[RunEvent], None]
