"""The hook objects a declarative entry becomes: one class per hook point, one transport each.

The hook does what all three kinds share (matcher and `when`, building the input, applying
the answer); the transport (command, Python callable, HTTP endpoint) only carries the input
there and the reply back.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from hookgate.catalog.declarative.protocol import HookReply, apply_reply, hook_input
from hookgate.hooks.facts import provenance_of
from hookgate.hooks.model import (
    FailMode,
    HookContext,
    HookPoint,
    HookResult,
    PostToolUseHook,
    PreToolUseHook,
    SessionStartHook,
)
from hookgate.matching import Condition, ToolMatcher, selects


class Transport(Protocol):
    """Carries a hook's input to its code and the reply back."""

    @property
    def cwd(self) -> str | None:
        """The working directory the hook's code sees (its ``cwd`` input); None: ours."""

    async def ask(self, payload: dict[str, Any], point: HookPoint) -> HookReply: ...

    def describe(self) -> str: ...


class _DeclaredHook:
    """What every declarative hook does; mixed into the base class of its point."""

    name: str
    priority: int
    fail_mode: FailMode
    timeout: float | None
    #: The engine keeps a Claude Code-shaped transcript of the run for this hook.
    reads_transcript = True

    def __init__(
        self,
        transport: Transport,
        *,
        name: str,
        priority: int,
        fail_mode: FailMode,
        timeout: float,
        matcher: ToolMatcher,
        when: Condition | None,
    ) -> None:
        self.transport = transport
        self.name = name
        self.priority = priority
        self.fail_mode = fail_mode
        self.timeout = timeout
        self.tool_matcher = matcher
        #: The matcher as declared, for listings such as ``hookgate check``.
        self.matcher = str(matcher)
        self.when = when
        # A `when` over provenance is evaluated before execute: traced before the chain.
        self.reads_provenance = when is not None and when.reads_provenance
        # Set by should_trigger, read by the execute that the registry starts right after
        # it (no await in between), so a `when` that could not be evaluated is traced.
        self._when_failure: tuple[int, str] | None = None

    def should_trigger(self, ctx: HookContext) -> bool:
        picked, failure = selects(self.tool_matcher, self.when, ctx)
        if failure is not None:
            self._when_failure = (id(ctx), failure)
        return picked

    async def execute(self, ctx: HookContext) -> HookResult:
        failure, self._when_failure = self._when_failure, None
        cwd = self.transport.cwd or os.getcwd()
        await provenance_of(ctx)  # the input carries it (metadata.provenance)
        reply = await self.transport.ask(hook_input(ctx, cwd=cwd), ctx.hook_point)
        result = apply_reply(reply, ctx, self.name)
        if failure is not None and failure[0] == id(ctx):
            result.side_effects.insert(
                0, f"'when' {self.when} could not be evaluated ({failure[1]}); "
                   "the hook ran (fail closed)"
            )
        return result

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.name!r} {self.transport.describe()} "
                f"matcher={self.matcher!r} priority={self.priority}>")


class DeclaredPreToolUseHook(_DeclaredHook, PreToolUseHook):
    """A declarative hook at PreToolUse: may block, ask for a person, or rewrite arguments."""


class DeclaredPostToolUseHook(_DeclaredHook, PostToolUseHook):
    """A declarative hook at PostToolUse: may rewrite or block the observation."""


class DeclaredSessionStartHook(_DeclaredHook, SessionStartHook):
    """A declarative hook at SessionStart: may add context or stop the session."""


DeclaredHook = DeclaredPreToolUseHook | DeclaredPostToolUseHook | DeclaredSessionStartHook

HOOK_CLASSES: dict[HookPoint, type[DeclaredHook]] = {
    HookPoint.PRE_TOOL_USE: DeclaredPreToolUseHook,
    HookPoint.POST_TOOL_USE: DeclaredPostToolUseHook,
    HookPoint.SESSION_START: DeclaredSessionStartHook,
}
