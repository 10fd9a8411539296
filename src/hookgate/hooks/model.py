"""The hook model's values: where a hook fires, what it sees, what it answers.

These types are the public contract (SPEC §1, pinned). They import only the hook
package's own values (the approval outcome, the metadata view), so every other room can
depend on them and they on none.
"""

from __future__ import annotations

import enum
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from hookgate.hooks.approval import ApprovalOutcome, AskedBy
from hookgate.hooks.metadata import MetadataView
from hookgate.hooks.withheld import Withheld

FailMode = Literal["closed", "open"]

#: Receives live progress from a hook (e.g. "confirmation_pending"); the engine forwards it
#: to the run's event stream. ``None`` outside an engine.
EventEmitter = Callable[[str, dict[str, Any]], None]


class HookPoint(enum.StrEnum):
    """The three fixed points of the agent loop where hooks run."""

    SESSION_START = "SessionStart"
    PRE_TOOL_USE = "PreToolUse"
    POST_TOOL_USE = "PostToolUse"


@dataclass(slots=True, weakref_slot=True)
class HookContext:
    """What a hook sees.

    ``metadata`` is a read-only mapping: the request facts the engine knows (SPEC §1) and
    views of the typed fields below under their documented keys (``approved_call``,
    ``hook_context``, ``stop_run`` …). Components talk through the typed fields:
    ``approval`` (set by the approval gate), ``added_context`` (texts shown next to the
    tool's output), ``stop_run`` (a hook stops the whole run: why), ``asked_by`` (hooks that
    asked for a person's approval), ``tool_error`` (PostToolUse: the tool raised; a `Withheld`
    whose every printed form is the fixed words),
    ``output_withheld`` (PostToolUse: a failing closed hook withheld the output) and
    ``call_started`` (``time.perf_counter()`` when the call entered the hooks) and
    ``policy_decision`` (the ``cedar_policy`` hook's decision, explained) and
    ``shadow_decisions`` (what each rule in shadow mode would have decided; policies/shadow.py
    records them, and nothing reads them to decide).
    """

    hook_point: HookPoint
    tool_name: str | None = None
    tool_args: dict[str, Any] = field(default_factory=dict)
    tool_result: Any = None
    agent_id: str | None = None
    user_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    emit: EventEmitter | None = None
    approval: ApprovalOutcome | None = None
    added_context: list[str] = field(default_factory=list)
    stop_run: str | None = None
    asked_by: list[AskedBy] = field(default_factory=list)
    tool_error: Withheld | None = None
    output_withheld: bool = False
    call_started: float | None = None
    policy_decision: str | None = None
    shadow_decisions: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        given = self.metadata
        facts: dict[str, Any]
        if type(given) is dict:  # the usual case first: an ABC's isinstance costs more
            facts = given
        elif isinstance(given, MetadataView):
            facts = given.facts
        else:
            facts = dict(given)
        self.metadata = MetadataView(self, facts)

    @property
    def facts(self) -> dict[str, Any]:
        """The request facts the engine set (``org_id``, ``run_id`` …), without the views."""
        view = self.metadata
        # type() first: isinstance against a Mapping subclass goes through ABCMeta.
        if type(view) is MetadataView or isinstance(view, MetadataView):
            return view.facts
        return dict(view)

    @property
    def requires_confirmation(self) -> bool:
        """The call needs a person's approval: the engine said so or a hook asked for it."""
        return bool(self.asked_by) or bool(self.facts.get("requires_confirmation"))

    def ask_for_confirmation(self, hook: str, reason: str | None) -> None:
        """Have the approval gate take this call to a person (a hook answered "ask")."""
        self.asked_by.append(AskedBy(hook, reason))


@dataclass(slots=True)
class HookResult:
    """What a hook answers. The defaults mean "allow, change nothing"."""

    allow: bool = True
    error: str | None = None
    modified_args: dict[str, Any] | None = None
    modified_result: Any | None = None
    side_effects: list[str] = field(default_factory=list)
    additional_context: str | None = None


#: The attributes that say what a hook does when it runs. A registry reads them when the
#: hook is registered and again whenever one is assigned on the instance afterwards.
OPTION_NAMES: frozenset[str] = frozenset(
    {"execute", "should_trigger", "timeout", "fail_mode", "priority",
     "recheck_after_approval", "reads_provenance"})


class _Hook(ABC):
    """Shared shape of the three hook bases.

    ``recheck_after_approval``: a PreToolUse hook whose answer can change while a person
    decides (e.g. "is the org read-only?") sets it; after an approval it runs once more
    right before the tool runs, and a block or failure then stops the call.

    ``reads_provenance``: a PreToolUse hook that reads ``metadata["provenance"]`` (directly
    or in a ``when`` condition) sets it, and the guarded path traces the call's provenance
    before the chain runs; an async hook may instead ``await provenance_of(ctx)``
    (hookgate.provenance). Without either, the session's facts are not read for the call.
    """

    point: ClassVar[HookPoint]
    name: str = ""
    priority: int = 100
    fail_mode: FailMode = "closed"
    timeout: float | None = None
    recheck_after_approval: bool = False
    reads_provenance: bool = False

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name in OPTION_NAMES:
            # A registry holding this hook precomputed how to run it; tell it to look again.
            for watcher in list(self.__dict__.get("_hookgate_watchers", ())):
                watcher.hook_changed(self)

    def _watch(self, watcher: Any) -> None:
        """Have ``watcher.hook_changed(self)`` called when an option is assigned."""
        watchers = self.__dict__.get("_hookgate_watchers")
        if watchers is None:
            watchers = weakref.WeakSet()
            object.__setattr__(self, "_hookgate_watchers", watchers)
        watchers.add(watcher)

    def _unwatch(self, watcher: Any) -> None:
        self.__dict__.get("_hookgate_watchers", weakref.WeakSet()).discard(watcher)

    @abstractmethod
    async def execute(self, ctx: HookContext) -> HookResult:
        """Decide about ``ctx``; raising or returning anything but a HookResult is a failure."""

    def should_trigger(self, ctx: HookContext) -> bool:
        """Return False to skip this hook for ``ctx`` (default: always run)."""
        return True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} priority={self.priority}>"


class PreToolUseHook(_Hook):
    """Runs after the model picked a tool and before it runs; may block or rewrite args."""

    point = HookPoint.PRE_TOOL_USE


class PostToolUseHook(_Hook):
    """Runs after the tool returned and before the model sees it; may rewrite the result."""

    point = HookPoint.POST_TOOL_USE


class SessionStartHook(_Hook):
    """Runs once before the first model call; may add context to the initial prompt."""

    point = HookPoint.SESSION_START


Hook = PreToolUseHook | PostToolUseHook | SessionStartHook
HOOK_BASES: tuple[type[_Hook], ...] = (PreToolUseHook, PostToolUseHook, SessionStartHook)


def is_hook(obj: object) -> bool:
    """True when ``obj`` is an instance of one of the three hook bases."""
    return isinstance(obj, HOOK_BASES)
