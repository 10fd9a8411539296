"""The hook registry: runs the hooks of one point in order and folds their answers.

The semantics are SPEC §1: priority order with registration order on ties, argument and
result chaining, the first block wins, and failure is closed unless a hook says "open".
The chains are hot paths (every tool call crosses two), so per-hook work is kept to what
the semantics need: no task per hook, a timeout scope only for hooks that declare one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, NamedTuple

from hookgate.hooks.errors import DuplicateHookError
from hookgate.hooks.model import (
    Hook,
    HookContext,
    HookPoint,
    HookResult,
    PostToolUseHook,
    PreToolUseHook,
    SessionStartHook,
    _Hook,
)
from hookgate.hooks.trace import ChainResult, HookEvent

_DEFAULT_TRIGGER = _Hook.should_trigger


class _Entry(NamedTuple):
    hook: _Hook
    name: str
    checks_trigger: bool
    timeout: float | None
    closed: bool


class _NotAHookResult(Exception):
    pass


def _entry(hook: _Hook) -> _Entry:
    checks = type(hook).should_trigger is not _DEFAULT_TRIGGER
    return _Entry(hook, hook.name, checks, hook.timeout, hook.fail_mode != "open")


def _describe_failure(name: str, exc: BaseException, timeout: float | None) -> str:
    if isinstance(exc, TimeoutError):
        return f"hook '{name}' timed out after {timeout:g}s"
    if isinstance(exc, _NotAHookResult):
        return f"hook '{name}' failed: {exc}"
    detail = str(exc) or type(exc).__name__
    return f"hook '{name}' failed: {type(exc).__name__}: {detail}"


async def _call(e: _Entry, ctx: HookContext) -> HookResult:
    if e.timeout is None:
        r = await e.hook.execute(ctx)
    else:
        async with asyncio.timeout(e.timeout):
            r = await e.hook.execute(ctx)
    if type(r) is not HookResult and not isinstance(r, HookResult):
        raise _NotAHookResult(f"returned {type(r).__name__}, not a HookResult")
    return r


class HookRegistry:
    """An ordered set of hooks for one session; build a fresh one per session."""

    def __init__(self, hooks: Iterable[Hook] = ()) -> None:
        self._hooks: list[_Hook] = []
        self._chains: dict[HookPoint, tuple[_Entry, ...]] = {p: () for p in HookPoint}
        for hook in hooks:
            self.register(hook)

    # -- membership ----------------------------------------------------------------------

    def register(self, hook: Hook) -> None:
        """Add ``hook``; its point is given by its base class."""
        if not isinstance(hook, _Hook):
            raise TypeError(
                f"{hook!r} is not a hook: subclass PreToolUseHook, PostToolUseHook or "
                "SessionStartHook"
            )
        name = hook.name or type(hook).__name__
        hook.name = name
        if any(h.name == name for h in self._hooks):
            raise DuplicateHookError(f"a hook named '{name}' is already registered")
        self._hooks.append(hook)
        self._rebuild(hook.point)

    def unregister(self, name: str) -> None:
        """Remove the hook called ``name``; KeyError when there is none."""
        for i, h in enumerate(self._hooks):
            if h.name == name:
                del self._hooks[i]
                self._rebuild(h.point)
                return
        raise KeyError(f"no hook named '{name}' is registered")

    def hooks(self, point: HookPoint | None = None) -> list[_Hook]:
        """The hooks at ``point`` (or all of them), in run order."""
        if point is not None:
            return [e.hook for e in self._chains[point]]
        return [e.hook for p in HookPoint for e in self._chains[p]]

    def get(self, name: str) -> _Hook | None:
        return next((h for h in self._hooks if h.name == name), None)

    def __len__(self) -> int:
        return len(self._hooks)

    def _rebuild(self, point: HookPoint) -> None:
        # sorted() is stable, so equal priorities keep registration order.
        members = [h for h in self._hooks if h.point is point]
        self._chains[point] = tuple(_entry(h) for h in sorted(members, key=lambda h: h.priority))

    # -- running -------------------------------------------------------------------------

    async def run_pre_tool_use(
        self, ctx: HookContext, *, start_at: str | None = None
    ) -> ChainResult:
        """Run the PreToolUse chain; ``ctx.tool_args`` ends as the final arguments.

        ``start_at`` resumes a chain that was interrupted (a restart while the approval
        gate waited): hooks before the named one already ran and are skipped.
        """
        chain = self._chains[HookPoint.PRE_TOOL_USE]
        if start_at is not None:
            chain = _from(chain, start_at)
        events: list[HookEvent] | None = None
        effects: list[str] | None = None
        rewritten = False
        for e in chain:
            if e.checks_trigger and not e.hook.should_trigger(ctx):
                continue
            try:
                r = await _call(e, ctx)
            except Exception as exc:
                msg = _describe_failure(e.name, exc, e.timeout)
                events = _add(events, e.name, HookPoint.PRE_TOOL_USE, "failed", msg, e)
                if e.closed:
                    return ChainResult(
                        allow=False,
                        error=f"Blocked: {msg}",
                        modified_args=ctx.tool_args if rewritten else None,
                        side_effects=effects or [],
                        events=events,
                        blocked_by=e.name,
                        failed_closed=True,
                    )
                continue
            if r.side_effects:
                effects, events = _effects(effects, events, e.name, HookPoint.PRE_TOOL_USE, r)
            if not r.allow:
                error = r.error or f"Blocked by hook '{e.name}'."
                events = _add(events, e.name, HookPoint.PRE_TOOL_USE, "blocked", error)
                return ChainResult(
                    allow=False,
                    error=error,
                    modified_args=ctx.tool_args if rewritten else None,
                    side_effects=effects or [],
                    events=events,
                    blocked_by=e.name,
                )
            if r.modified_args is not None:
                if not isinstance(r.modified_args, dict):
                    msg = f"hook '{e.name}' failed: modified_args must be a dict"
                    events = _add(events, e.name, HookPoint.PRE_TOOL_USE, "failed", msg, e)
                    if e.closed:
                        return ChainResult(
                            allow=False, error=f"Blocked: {msg}", side_effects=effects or [],
                            events=events, blocked_by=e.name, failed_closed=True,
                        )
                    continue
                ctx.tool_args = r.modified_args
                rewritten = True
                events = _add(
                    events, e.name, HookPoint.PRE_TOOL_USE, "rewrote_args",
                    "arguments rewritten",
                )
        return ChainResult(
            modified_args=ctx.tool_args if rewritten else None,
            side_effects=effects or [],
            events=events,
        )

    async def run_post_tool_use(self, ctx: HookContext) -> ChainResult:
        """Run the PostToolUse chain; ``ctx.tool_result`` ends as what the model sees.

        A closed failure withholds the raw output: later hooks see the error observation
        instead (so an audit hook still records the call), and the model gets that error.
        """
        events: list[HookEvent] | None = None
        effects: list[str] | None = None
        rewritten = False
        withheld_error: str | None = None
        failed_by: str | None = None
        for e in self._chains[HookPoint.POST_TOOL_USE]:
            if e.checks_trigger and not e.hook.should_trigger(ctx):
                continue
            try:
                r = await _call(e, ctx)
            except Exception as exc:
                msg = _describe_failure(e.name, exc, e.timeout)
                events = _add(events, e.name, HookPoint.POST_TOOL_USE, "failed", msg, e)
                if e.closed and withheld_error is None:
                    withheld_error = f"Tool output withheld: {msg}"
                    failed_by = e.name
                    ctx.tool_result = withheld_error
                    ctx.metadata["output_withheld"] = True
                continue
            if r.side_effects:
                effects, events = _effects(effects, events, e.name, HookPoint.POST_TOOL_USE, r)
            if r.modified_result is not None and withheld_error is None:
                ctx.tool_result = r.modified_result
                rewritten = True
                events = _add(
                    events, e.name, HookPoint.POST_TOOL_USE, "rewrote_result",
                    "result rewritten",
                )
        if withheld_error is not None:
            return ChainResult(
                allow=True,
                error=withheld_error,
                modified_result=withheld_error,
                side_effects=effects or [],
                events=events,
                blocked_by=failed_by,
                withheld=True,
                failed_closed=True,
            )
        return ChainResult(
            modified_result=ctx.tool_result if rewritten else None,
            side_effects=effects or [],
            events=events,
        )

    async def run_session_start(self, ctx: HookContext) -> ChainResult:
        """Run the SessionStart chain; a closed failure stops the session (allow=False)."""
        events: list[HookEvent] | None = None
        effects: list[str] | None = None
        context: list[str] = []
        for e in self._chains[HookPoint.SESSION_START]:
            if e.checks_trigger and not e.hook.should_trigger(ctx):
                continue
            try:
                r = await _call(e, ctx)
            except Exception as exc:
                msg = _describe_failure(e.name, exc, e.timeout)
                events = _add(events, e.name, HookPoint.SESSION_START, "failed", msg, e)
                if e.closed:
                    return ChainResult(
                        allow=False,
                        error=f"Session stopped: {msg}",
                        side_effects=effects or [],
                        events=events,
                        blocked_by=e.name,
                        failed_closed=True,
                    )
                continue
            if r.side_effects:
                effects, events = _effects(effects, events, e.name, HookPoint.SESSION_START, r)
            if r.additional_context:
                context.append(r.additional_context)
                events = _add(
                    events, e.name, HookPoint.SESSION_START, "context",
                    f"added {len(r.additional_context)} characters of context",
                )
        return ChainResult(
            additional_context="\n\n".join(context) if context else None,
            side_effects=effects or [],
            events=events,
        )


def _from(chain: tuple[_Entry, ...], name: str) -> tuple[_Entry, ...]:
    for i, e in enumerate(chain):
        if e.name == name:
            return chain[i:]
    raise KeyError(f"cannot resume the PreToolUse chain at '{name}': no such hook")


def _add(
    events: list[HookEvent] | None,
    name: str,
    point: HookPoint,
    kind: Any,
    detail: str,
    entry: _Entry | None = None,
) -> list[HookEvent]:
    if events is None:
        events = []
    mode = None if entry is None else ("closed" if entry.closed else "open")
    events.append(HookEvent(name, point, kind, detail, mode))
    return events


def _effects(
    effects: list[str] | None,
    events: list[HookEvent] | None,
    name: str,
    point: HookPoint,
    r: HookResult,
) -> tuple[list[str], list[HookEvent]]:
    effects = effects if effects is not None else []
    events = events if events is not None else []
    for s in r.side_effects:
        effects.append(f"{name}: {s}")
        events.append(HookEvent(name, point, "side_effect", str(s)))
    return effects, events


__all__ = [
    "HookRegistry",
    "PostToolUseHook",
    "PreToolUseHook",
    "SessionStartHook",
]
