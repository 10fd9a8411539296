"""The one typed call every caller hands to the guarded path (the engines, the MCP gateway,
evals, the guarded-call API, Claude Code, Codex): who asks and for whom, where, the tool as
declared and the arguments as its parameter types validated and converted them. `new_call`
is its only constructor and `converted_arguments` the one conversion of a tool's arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from hookgate.hooks.model import HookContext
from hookgate.tools.calls import CallIdentity, ToolCall
from hookgate.tools.errors import ToolArgumentsError
from hookgate.tools.tool import Tool

__all__ = ["GuardedCall", "RefusedCall", "ShadowRecorder", "Shape", "converted_arguments",
           "new_call"]

#: Set only while `new_call` (or a call's own rewrite) makes a `GuardedCall`: one made any
#: other way (directly, ``dataclasses.replace``) refuses to exist.
_MAKING: ContextVar[bool] = ContextVar("hookgate_making_guarded_call", default=False)
#: ``asker`` unset: the call's initiator asks for themself (the engines' runs).
_INITIATOR = object()

#: The rules' last word on the tool, given the converted arguments (the external path: a
#: declared tool with a rule's person added, or a stand-in with the rules' flags).
Shape = Callable[[Tool, dict[str, Any]], Tool]


class ShadowRecorder(Protocol):
    """Records on a call's context what the rules in shadow mode that apply to it would have
    decided (hookgate.policies.shadow.record_shadow). ``counted=False``: only the notes, for
    the audit row of a result reported later (counted when the call was decided)."""

    def __call__(self, ctx: HookContext, *, counted: bool = True) -> None: ...


def converted_arguments(tool: Tool, args: Any) -> dict[str, Any]:
    """``args`` validated and converted by ``tool``'s declared parameter types: the model's
    arguments, a hook's rewrite, an approver's edit, a Cedar hook's facts. Raises
    ToolArgumentsError saying what is wrong."""
    return tool.validate(args)


@dataclass(frozen=True, slots=True)
class GuardedCall:
    """One call that may run: made only by `new_call`, its arguments already converted."""

    #: The agent, whom the call acts for (``user_id``: its initiator, whom the gate's
    #: approver scope ``initiator`` names), the org, the run, the session
    #: (``conversation_id``), the path, the delegation (parent agent, depth, parent session).
    identity: CallIdentity
    #: Who asks: the token's user (a person or a service identity acting for the initiator);
    #: on the engines the run's user, who is also the initiator.
    asker: str | None
    call_id: str
    #: The tool as declared (and as the rules shaped it): its condition, types, connector.
    tool: Tool
    #: Validated and converted by ``tool``'s parameter types (`converted_arguments`).
    arguments: dict[str, Any]
    #: The caller's request facts for the hooks (Claude Code's cwd, the schema, ...).
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: What the agent's gate rules in shadow mode would have decided about this call: the
    #: guarded path records it on the call's context before its hooks run.
    shadow: ShadowRecorder | None = None

    def __post_init__(self) -> None:
        if not _MAKING.get():
            raise TypeError("a GuardedCall is made only by hookgate.tools.guarded_call.new_call")

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def initiator(self) -> str | None:
        return self.identity.user_id

    @property
    def run_id(self) -> str:
        return self.identity.run_id

    @property
    def tool_call(self) -> ToolCall:
        """The call as the hooks' metadata and the ledger name it."""
        return ToolCall(self.call_id, self.tool.name, self.arguments)

    def rewritten(self, args: Any) -> GuardedCall:
        """This call with ``args`` (a hook's rewrite) converted by the same types
        (ToolArgumentsError: they do not fit)."""
        converted = converted_arguments(self.tool, args)
        with _making():
            return GuardedCall(self.identity, self.asker, self.call_id, self.tool, converted,
                               self.metadata, self.shadow)

    def with_facts(self, facts: Mapping[str, Any]) -> GuardedCall:
        """This call with more request facts for the hooks."""
        with _making():
            return GuardedCall(self.identity, self.asker, self.call_id, self.tool,
                               self.arguments, {**self.metadata, **facts}, self.shadow)

    def with_shadow(self, shadow: ShadowRecorder) -> GuardedCall:
        """This call with what the rules in shadow mode would have decided about it."""
        with _making():
            return GuardedCall(self.identity, self.asker, self.call_id, self.tool,
                               self.arguments, self.metadata, shadow)


@dataclass(frozen=True, slots=True)
class RefusedCall:
    """A call refused before any hook ran: its tool is unknown, or its arguments do not fit
    the tool's types. The guarded path tells the observers of blocked calls about it."""

    identity: CallIdentity
    #: The call as it was asked for (its name and arguments as the caller sent them).
    requested: ToolCall
    tool: Tool | None
    status: Literal["unknown_tool", "invalid"]
    #: What the model is told.
    message: str
    #: Why the arguments do not fit (``status == "invalid"``).
    error: ToolArgumentsError | None = None

    @property
    def name(self) -> Any:
        return self.requested.name

    @property
    def call_id(self) -> str:
        return self.requested.id


def new_call(identity: CallIdentity, requested: ToolCall, tools: Mapping[str, Tool], *,
             asker: Any = _INITIATOR, metadata: Mapping[str, Any] | None = None,
             shape: Shape | None = None, checked: bool = True) -> GuardedCall | RefusedCall:
    """The typed call of ``requested`` with the tool ``tools`` name for it and its arguments
    converted by that tool's types, or why it is refused. ``asker``: who asks, when not the
    initiator (``identity.user_id``) themself. ``shape``: the rules' last word on the tool
    for the converted arguments. ``checked=False``: the arguments are a call's final ones,
    converted when it was decided (a result reported later)."""
    tool = tools.get(requested.name) if isinstance(requested.name, str) else None
    if tool is None:
        return RefusedCall(identity, requested, None, "unknown_tool",
                           _unknown_tool_message(requested.name, tools))
    try:
        args = converted_arguments(tool, requested.args) if checked else dict(requested.args)
    except ToolArgumentsError as exc:
        return RefusedCall(identity, requested, tool, "invalid", f"Error: {exc}", exc)
    if shape is not None:
        tool = shape(tool, args)
    with _making():
        return GuardedCall(identity, identity.user_id if asker is _INITIATOR else asker,
                           requested.id, tool, args, dict(metadata or {}))


@contextmanager
def _making() -> Iterator[None]:
    token = _MAKING.set(True)
    try:
        yield
    finally:
        _MAKING.reset(token)


def _unknown_tool_message(name: Any, tools: Mapping[str, Tool]) -> str:
    # Tool names are exact: no case folding or trimming, so a near miss never runs the
    # real tool, but the model is told precisely what was wrong so it can correct itself.
    known = ", ".join(sorted(tools)) or "none"
    msg = f"Error: unknown tool {name!r}. Available tools: {known}."
    if not isinstance(name, str):
        return msg
    if not name.isascii():
        msg += f" The name has non-ASCII characters: {name!a}."
    near = [t for t in tools if t.casefold() == name.strip().casefold() and t != name]
    if near:
        msg += f" Tool names are exact; did you mean {near[0]!r}?"
    return msg
