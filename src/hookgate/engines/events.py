"""Run events: what a run's trace and its live stream are made of.

One frozen `RunEvent` dataclass per event type (SPEC §6's names), united in `AnyRunEvent` and
discriminated by ``type``. `event_of` / `decode` turn the wire shape (``{"type", "seq",
...payload}``) into an event and `RunEvent.to_dict` back, byte for byte: the payload keys an
event type declares come first, in order, and anything else (an engine's own keys, e.g. an
eval's ``hooks_bypassed``) rides along in ``extra``. A payload that lacks a declared key,
or orders them otherwise, decodes as `OtherEvent`, so no stored or streamed event changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal, TypeAlias, cast

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

class _Decoding(type):
    """``RunEvent(type, data, seq)`` decodes to the event class of ``type`` (`event_of`);
    each event class is constructed from its own fields."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is RunEvent:
            return event_of(*args, **kwargs)
        return super().__call__(*args, **kwargs)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEvent(metaclass=_Decoding):
    """One event of a run: its ``type``, its number in the run (``seq``, from 1), its
    payload. ``RunEvent(type, data, seq)`` gives the event of that type (see `event_of`)."""

    type: str = ""
    seq: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: The payload keys this event type declares, in wire order.
    payload_keys: ClassVar[tuple[str, ...]] = ()

    @property
    def data(self) -> dict[str, Any]:
        """The payload as the wire carries it (every key but ``type`` and ``seq``)."""
        out = {k: getattr(self, k) for k in self.payload_keys}
        if self.extra:
            out.update(self.extra)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The event as stored and streamed: ``{"type", "seq", ...payload}``."""
        out: dict[str, Any] = {"type": self.type, "seq": self.seq}
        for k in self.payload_keys:
            out[k] = getattr(self, k)
        if self.extra:
            out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> AnyRunEvent:
        """The event a wire dict carries (see `decode`)."""
        return decode(raw)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStart(RunEvent):
    type: Literal["session_start"] = field(default="session_start", init=False)
    agent_id: str
    allowed: bool
    error: str | None
    additional_context: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelTurn(RunEvent):
    type: Literal["model_turn"] = field(default="model_turn", init=False)
    step: int
    tool_calls: list[dict[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted(RunEvent):
    type: Literal["tool_call"] = field(default="tool_call", init=False)
    tool_call_id: str
    tool_name: str
    args: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class _ToolOutcomeEvent(RunEvent):
    tool_call_id: str
    tool_name: str
    args: Any
    allowed: bool
    status: str
    observation: str
    error: str | None
    side_effects: list[str]
    hooks: list[dict[str, Any]]
    blocked_by: str | None
    reason: str | None
    stop_reason: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult(_ToolOutcomeEvent):
    type: Literal["tool_result"] = field(default="tool_result", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolBlocked(_ToolOutcomeEvent):
    type: Literal["tool_blocked"] = field(default="tool_blocked", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfirmationPending(RunEvent):
    type: Literal["confirmation_pending"] = field(default="confirmation_pending", init=False)
    request_id: str
    tool_call_id: str
    tool_name: str
    args: Any
    mode: str
    channel_id: str | None
    approver_scope: str
    expires_at: str
    resumed: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfirmationResolved(RunEvent):
    type: Literal["confirmation_resolved"] = field(default="confirmation_resolved",
                                                   init=False)
    request_id: str
    tool_call_id: str
    tool_name: str
    status: str
    decided_by: str | None
    reason: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer(RunEvent):
    type: Literal["answer"] = field(default="answer", init=False)
    answer: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunError(RunEvent):
    type: Literal["error"] = field(default="error", init=False)
    error: str
    status: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Done(RunEvent):
    type: Literal["done"] = field(default="done", init=False)
    status: str
    answer: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan(RunEvent):
    type: Literal["plan"] = field(default="plan", init=False)
    steps: list[dict[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegateStart(RunEvent):
    type: Literal["delegate_start"] = field(default="delegate_start", init=False)
    child_run_id: str
    agent_id: str
    parent_agent_id: str
    depth: int
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegateEnd(RunEvent):
    type: Literal["delegate_end"] = field(default="delegate_end", init=False)
    child_run_id: str
    agent_id: str
    status: str
    answer: str | None
    error: str | None
    trace: list[dict[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class StandingRuleSkipped(RunEvent):
    type: Literal["standing_rule_skipped"] = field(default="standing_rule_skipped",
                                                   init=False)
    rule_id: str
    tool_call_id: str
    tool_name: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OtherEvent(RunEvent):
    """An event of an engine's own type (``step_result``, ``node_result``, ``step_skipped``
    …), or one whose payload is not its type's declared shape: the payload as it came."""

    type: str

    @property
    def data(self) -> dict[str, Any]:
        return dict(self.extra)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "seq": self.seq, **self.extra}


#: Every event type, discriminated by ``type`` (match on the class).
AnyRunEvent: TypeAlias = (SessionStart | ModelTurn | ToolCallStarted | ToolResult | ToolBlocked
                       | ConfirmationPending | ConfirmationResolved | Answer | RunError | Done
                       | Plan | DelegateStart | DelegateEnd | StandingRuleSkipped | OtherEvent)

_DECLARED: tuple[type[RunEvent], ...] = (
    SessionStart, ModelTurn, ToolCallStarted, ToolResult, ToolBlocked, ConfirmationPending,
    ConfirmationResolved, Answer, RunError, Done, Plan, DelegateStart, DelegateEnd,
    StandingRuleSkipped)
for _cls in _DECLARED:
    _cls.payload_keys = tuple(f.name for f in fields(_cls)
                              if f.name not in ("seq", "extra", "type"))

#: Each declared event class by its ``type``.
EVENT_CLASSES: dict[str, type[RunEvent]] = {
    str(_cls.__dataclass_fields__["type"].default): _cls for _cls in _DECLARED}


def event_of(type_: str, data: Mapping[str, Any] | None = None, seq: int = 0) -> AnyRunEvent:
    """The event of type ``type_`` with payload ``data`` (the one place payloads decode)."""
    if data is None:
        data = {}
    cls = EVENT_CLASSES.get(type_)
    if cls is not None:
        keys: tuple[str, ...] = cls.payload_keys
        n = len(keys)
        if tuple(data)[:n] == keys:
            if len(data) == n:
                return cast(AnyRunEvent, cls(seq=seq, **data))
            items = iter(data.items())
            own = {k: v for _, (k, v) in zip(keys, items, strict=False)}
            return cast(AnyRunEvent, cls(seq=seq, extra=dict(items), **own))
    return OtherEvent(type=type_, seq=seq, extra=dict(data))


def decode(raw: Mapping[str, Any]) -> AnyRunEvent:
    """The event a wire dict (``{"type", "seq", ...payload}``) carries."""
    data = {k: v for k, v in raw.items() if k != "type" and k != "seq"}
    return event_of(str(raw["type"]), data, int(raw.get("seq", 0)))


EventSink = Callable[[RunEvent], None]
