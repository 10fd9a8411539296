"""Trace records of what hooks did: blocks, rewrites, side effects and failures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from hookgate.hooks.model import HookPoint, HookResult

HookEventKind = Literal[
    "blocked", "rewrote_args", "rewrote_result", "side_effect", "failed", "context"
]


@dataclass(slots=True, frozen=True)
class HookEvent:
    """One thing a hook did at one point, attributed to the hook by name."""

    hook: str
    point: HookPoint
    kind: HookEventKind
    detail: str = ""
    fail_mode: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "hook": self.hook,
            "point": self.point.value,
            "kind": self.kind,
            "detail": self.detail,
        }
        if self.fail_mode is not None:
            out["fail_mode"] = self.fail_mode
        return out


@dataclass(slots=True)
class ChainResult(HookResult):
    """The combined answer of one hook chain, with everything that happened on the way.

    ``blocked_by`` names the hook that said no (PreToolUse) or failed closed; ``withheld``
    is set when a PostToolUse failure kept the tool's raw output from the model.
    """

    events: list[HookEvent] | None = None
    blocked_by: str | None = None
    withheld: bool = False
    failed_closed: bool = False

    @property
    def trace(self) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self.events or ()]
