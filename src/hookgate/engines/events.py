"""Run events: what a run's trace and its live stream are made of.

One frozen `RunEvent` dataclass per event type (SPEC §6's names), united in `AnyRunEvent`
and discriminated by class (and by ``type``). Each event keeps its payload exactly as it
came (``data``), so what is stored and streamed (``{"type", "seq", ...payload}``) is the
same bytes as ever; its class reads the payload's keys as typed attributes
(``Done.status``, ``ToolResult.observation``). `event_of` / `decode` are the one place a
payload becomes an event, `RunEvent.to_dict` the one way back. Construction costs what a
plain record does: the run's hot path builds one per event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypeVar, cast, overload

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

T = TypeVar("T")


class _Key(Generic[T]):
    """A payload key read as a typed attribute (None when the payload lacks it)."""

    __slots__ = ("name",)

    def __init__(self) -> None:
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> _Key[T]: ...
    @overload
    def __get__(self, obj: RunEvent, owner: type) -> T: ...

    def __get__(self, obj: RunEvent | None, owner: type) -> T | _Key[T]:
        if obj is None:
            return self
        return cast(T, obj.data.get(self.name))


class _Decoding(type):
    """``RunEvent(type, data, seq)`` decodes to the event class of ``type`` (`event_of`);
    each event class is constructed as itself."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is RunEvent:
            return event_of(*args, **kwargs)
        return super().__call__(*args, **kwargs)


@dataclass(frozen=True, slots=True)
class RunEvent(metaclass=_Decoding):
    """One event of a run: its ``type``, its payload (``data``: every key but ``type`` and
    ``seq``) and its number in the run (``seq``, from 1). ``RunEvent(type, data, seq)``
    gives the event of that type's class."""

    type: str
    data: dict[str, Any] = field(default_factory=dict)
    seq: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The event as stored and streamed: ``{"type", "seq", ...payload}``."""
        return {"type": self.type, "seq": self.seq, **self.data}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> AnyRunEvent:
        """The event a wire dict carries (see `decode`)."""
        return decode(raw)


@dataclass(frozen=True, slots=True)
class SessionStart(RunEvent):
    """The SessionStart hooks ran: whether the session may go on, and the context added."""

    agent_id = _Key[str]()
    allowed = _Key[bool]()
    error = _Key[str | None]()
    additional_context = _Key[str | None]()


@dataclass(frozen=True, slots=True)
class ModelTurn(RunEvent):
    """The model answered with tool calls (``tool_calls``: each ``{"id", "name", "args"}``)."""

    step = _Key[int]()
    tool_calls = _Key[list[dict[str, Any]]]()


@dataclass(frozen=True, slots=True)
class ToolCallStarted(RunEvent):
    """A tool call enters the guarded path."""

    tool_call_id = _Key[str]()
    tool_name = _Key[str]()
    args = _Key[Any]()


@dataclass(frozen=True, slots=True)
class _ToolOutcomeEvent(RunEvent):
    tool_call_id = _Key[str]()
    tool_name = _Key[str]()
    args = _Key[Any]()
    allowed = _Key[bool]()
    status = _Key[str]()
    observation = _Key[str]()
    error = _Key[str | None]()
    side_effects = _Key[list[str]]()
    hooks = _Key[list[dict[str, Any]]]()
    blocked_by = _Key[str | None]()
    reason = _Key[str | None]()
    stop_reason = _Key[str | None]()


@dataclass(frozen=True, slots=True)
class ToolResult(_ToolOutcomeEvent):
    """A call ran; ``observation`` is what the model was shown."""


@dataclass(frozen=True, slots=True)
class ToolBlocked(_ToolOutcomeEvent):
    """A call did not run: ``blocked_by`` and ``reason`` say who stopped it and why."""


@dataclass(frozen=True, slots=True)
class ConfirmationPending(RunEvent):
    """A call waits for a person's decision on request ``request_id``."""

    request_id = _Key[str]()
    tool_call_id = _Key[str]()
    tool_name = _Key[str]()
    args = _Key[Any]()
    mode = _Key[str]()
    channel_id = _Key[str | None]()
    approver_scope = _Key[str]()
    expires_at = _Key[str]()
    resumed = _Key[bool]()


@dataclass(frozen=True, slots=True)
class ConfirmationResolved(RunEvent):
    """Request ``request_id`` was decided (``status``), by ``decided_by``."""

    request_id = _Key[str]()
    tool_call_id = _Key[str]()
    tool_name = _Key[str]()
    status = _Key[str]()
    decided_by = _Key[str | None]()
    reason = _Key[str | None]()


@dataclass(frozen=True, slots=True)
class Answer(RunEvent):
    """The model's final answer."""

    answer = _Key[str]()


@dataclass(frozen=True, slots=True)
class RunError(RunEvent):
    """The run failed (``status``) with ``error``."""

    error = _Key[str]()
    status = _Key[str]()


@dataclass(frozen=True, slots=True)
class Done(RunEvent):
    """The run's last event: its final ``status`` and ``answer``."""

    status = _Key[str]()
    answer = _Key[str | None]()


@dataclass(frozen=True, slots=True)
class Plan(RunEvent):
    """The DAG engine's plan: its ``steps``."""

    steps = _Key[list[dict[str, Any]]]()


@dataclass(frozen=True, slots=True)
class StepSkipped(RunEvent):
    """A DAG step (``step_id``) or workflow node (``node_id``) did not run: ``reason``."""

    reason = _Key[str]()


@dataclass(frozen=True, slots=True)
class DelegateStart(RunEvent):
    """A delegate (``agent_id``) starts as child run ``child_run_id``."""

    child_run_id = _Key[str]()
    agent_id = _Key[str]()
    parent_agent_id = _Key[str]()
    depth = _Key[int]()
    message = _Key[str]()


@dataclass(frozen=True, slots=True)
class DelegateEnd(RunEvent):
    """A delegate's child run ended: its ``status``, ``answer``, ``error`` and ``trace``."""

    child_run_id = _Key[str]()
    agent_id = _Key[str]()
    status = _Key[str]()
    answer = _Key[str | None]()
    error = _Key[str | None]()
    trace = _Key[list[dict[str, Any]]]()


@dataclass(frozen=True, slots=True)
class StandingRuleSkipped(RunEvent):
    """A standing rule could not be applied to a call (``reason``); a person is asked."""

    rule_id = _Key[str]()
    tool_call_id = _Key[str]()
    tool_name = _Key[str]()
    reason = _Key[str]()


@dataclass(frozen=True, slots=True)
class OtherEvent(RunEvent):
    """An event of an engine's own type (``step_result``, ``node_result``, ``agent_node`` …)."""


#: Every event type, discriminated by class (match on it) and by ``type``.
AnyRunEvent: TypeAlias = (SessionStart | ModelTurn | ToolCallStarted | ToolResult | ToolBlocked
                          | ConfirmationPending | ConfirmationResolved | Answer | RunError
                          | Done | Plan | StepSkipped | DelegateStart | DelegateEnd
                          | StandingRuleSkipped | OtherEvent)

#: Each declared event class by its ``type`` (SPEC §6's names).
EVENT_CLASSES: dict[str, type[RunEvent]] = {
    "session_start": SessionStart, "model_turn": ModelTurn, "tool_call": ToolCallStarted,
    "tool_result": ToolResult, "tool_blocked": ToolBlocked,
    "confirmation_pending": ConfirmationPending,
    "confirmation_resolved": ConfirmationResolved, "answer": Answer, "error": RunError,
    "done": Done, "plan": Plan, "step_skipped": StepSkipped,
    "delegate_start": DelegateStart, "delegate_end": DelegateEnd,
    "standing_rule_skipped": StandingRuleSkipped,
}
_GET = EVENT_CLASSES.get
# The slots' own setters: an event is built at the cost of a plain record, without the
# frozen dataclass's checked __init__ (the run's hot path builds one per event).
_SET_TYPE = RunEvent.__dict__["type"].__set__
_SET_DATA = RunEvent.__dict__["data"].__set__
_SET_SEQ = RunEvent.__dict__["seq"].__set__
_NEW = object.__new__


def event_of(type_: str, data: dict[str, Any] | None = None, seq: int = 0) -> AnyRunEvent:
    """The event of type ``type_`` with payload ``data`` (the one place payloads decode)."""
    event = _NEW(_GET(type_, OtherEvent))
    _SET_TYPE(event, type_)
    _SET_DATA(event, {} if data is None else data)
    _SET_SEQ(event, seq)
    return event  # type: ignore[return-value]


def decode(raw: Mapping[str, Any]) -> AnyRunEvent:
    """The event a wire dict (``{"type", "seq", ...payload}``) carries."""
    data = {k: v for k, v in raw.items() if k != "type" and k != "seq"}
    return event_of(str(raw["type"]), data, int(raw.get("seq", 0)))


EventSink = Callable[[RunEvent], None]
