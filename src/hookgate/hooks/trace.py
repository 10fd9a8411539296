"""Trace records of what hooks did: blocks, rewrites, side effects and failures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from hookgate.hooks.model import HookPoint, HookResult
from hookgate.hooks.withheld import Withheld

HookEventKind = Literal[
    "blocked", "rewrote_args", "rewrote_result", "side_effect", "failed", "context"
]


#: The key of a trace entry's admin-only hook output (see HookEvent).
ADMIN_OUTPUT_KEY = "admin_output"
#: The key of a tool outcome's admin-only error text (see hookgate.tools.calls.ToolOutcome).
ADMIN_ERROR_KEY = "admin_error"
#: Every key that only org admins' trace view keeps (hookgate.server.trace_view drops them).
ADMIN_KEYS: frozenset[str] = frozenset({ADMIN_OUTPUT_KEY, ADMIN_ERROR_KEY})


@dataclass(slots=True, frozen=True)
class HookEvent:
    """One thing a hook did at one point, attributed to the hook by name.

    ``output`` is what a failed hook raised or printed. It may quote a tool's raw output,
    so it is a `Withheld`: shown to org admins only (as ``admin_output``, masked), never to
    the model, and never on a span, a log line or a member's view.
    """

    hook: str
    point: HookPoint
    kind: HookEventKind
    detail: str = ""
    fail_mode: str | None = None
    output: Withheld | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "hook": self.hook,
            "point": self.point.value,
            "kind": self.kind,
            "detail": self.detail,
        }
        if self.fail_mode is not None:
            out["fail_mode"] = self.fail_mode
        if self.output is not None:
            out[ADMIN_OUTPUT_KEY] = self.output.admin_text()
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
    #: The request the call waits on (a person's decision): it does not run yet.
    waiting: str | None = None

    @property
    def trace(self) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self.events or ()]


class _UnchangedResult(ChainResult):
    """The answer of a chain in which no hook did anything: allow, change nothing.

    One read-only instance serves every such call (it is the common case on the hot path);
    assigning to it raises instead of silently changing what later calls see.
    """

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        if self is UNCHANGED:
            raise AttributeError(
                "this chain result is shared and read-only; copy it with dataclasses.replace()"
            )
        object.__setattr__(self, name, value)


def _make_unchanged() -> ChainResult:
    result = object.__new__(_UnchangedResult)
    defaults: dict[str, Any] = {
        "allow": True, "error": None, "modified_args": None, "modified_result": None,
        "side_effects": (), "additional_context": None, "events": None, "blocked_by": None,
        "withheld": False, "failed_closed": False, "waiting": None,
    }
    for name, value in defaults.items():
        object.__setattr__(result, name, value)
    return result


#: Returned by a chain when no hook blocked, rewrote, failed or reported a side effect.
UNCHANGED: ChainResult = _make_unchanged()
