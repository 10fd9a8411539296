"""An imported Claude Code hook group: every matching handler of one event runs in parallel.

A group takes one place in hookgate's priority chain; inside it the handlers behave as in
Claude Code: all matching ones run at once (a logging hook still sees a call another hook
denies), their answers merge deny > defer > ask > allow, and each added context is kept.
One difference stays on purpose: a handler that crashes, times out or exits with a status
other than 0 or 2 fails closed unless it says ``fail_mode: open`` (Claude Code goes on).
"""

from __future__ import annotations

import asyncio
import fnmatch
from dataclasses import dataclass, field
from typing import Any

from hookgate.catalog.declarative.hook import Transport
from hookgate.catalog.declarative.protocol import HookProtocolError, apply_reply, hook_input
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
from hookgate.matching import ToolMatcher

#: The first string argument an ``if`` rule's pattern is matched against, per tool.
_RULE_ARGUMENT = {"Bash": "command", "Write": "file_path", "Edit": "file_path",
                  "MultiEdit": "file_path", "Read": "file_path", "WebFetch": "url",
                  "Glob": "pattern", "Grep": "pattern", "NotebookEdit": "notebook_path"}


@dataclass(frozen=True, slots=True)
class PermissionRule:
    """Claude Code's ``if`` filter in permission-rule syntax: ``Bash(git *)``, ``Write``."""

    tool: str
    pattern: str | None

    def matches(self, tool_name: str | None, args: dict[str, Any]) -> bool:
        if tool_name != self.tool:
            return False
        if self.pattern is None:
            return True
        key = _RULE_ARGUMENT.get(self.tool)
        value = args.get(key) if key else next(
            (v for v in args.values() if isinstance(v, str)), None)
        if not isinstance(value, str):
            return True  # cannot tell: run the hook (fail closed)
        pattern = self.pattern[:-2] + "*" if self.pattern.endswith(":*") else self.pattern
        return fnmatch.fnmatchcase(value, pattern)


@dataclass(slots=True)
class Handler:
    """One handler of a matcher group, with the options Claude Code gives it."""

    label: str
    transport: Transport
    matcher: ToolMatcher
    timeout: float
    fail_mode: FailMode = "closed"
    rule: PermissionRule | None = None
    background: bool = False
    once: bool = False
    ran: bool = field(default=False)

    def applies(self, ctx: HookContext, subject: str | None) -> bool:
        if self.once and self.ran:
            return False
        if not self.matcher.matches(subject):
            return False
        return self.rule is None or self.rule.matches(ctx.tool_name, ctx.tool_args)


class _Group:
    """What the three group classes share."""

    name: str
    priority: int
    fail_mode: FailMode
    timeout: float | None
    #: The engine keeps a Claude Code-shaped transcript of the run for this group.
    reads_transcript = True

    def __init__(self, event: str, handlers: list[Handler], *, name: str, priority: int,
                 project_dir: str, notes: list[str]) -> None:
        self.event = event
        self.handlers = handlers
        self.name = name
        self.priority = priority
        self.fail_mode = "closed"
        self.timeout = None  # each handler has its own; the group waits for the longest
        self.project_dir = project_dir
        #: What ``hookgate check`` says about this group (events without an equivalent …).
        self.notes = notes
        self.matcher = " / ".join(sorted({str(h.matcher) for h in handlers})) or "*"
        self._background: set[asyncio.Task[Any]] = set()

    def should_trigger(self, ctx: HookContext) -> bool:
        if self.event == "PostToolUseFailure":
            return ctx.tool_error is not None
        if self.event == "PostToolUse":
            return ctx.tool_error is None
        return True

    async def execute(self, ctx: HookContext) -> HookResult:
        subject = "startup" if ctx.hook_point is HookPoint.SESSION_START else ctx.tool_name
        chosen = [h for h in self.handlers if h.applies(ctx, subject)]
        if not chosen:
            return HookResult()
        await provenance_of(ctx)  # the input carries it (metadata.provenance)
        payload = hook_input(ctx, cwd=self.project_dir)
        payload["hook_event_name"] = self.event
        if self.event == "PostToolUseFailure":
            # The error as the chain has it (the tool's words, or an earlier hook's rewrite).
            payload["error"] = str(ctx.tool_result)
            payload["is_interrupt"] = False
            payload.pop("tool_response", None)
        waited = []
        for handler in chosen:
            handler.ran = True
            task = asyncio.ensure_future(self._one(handler, payload, ctx))
            if handler.background:
                # Claude Code's `async`: runs alongside, its answer is not waited for.
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            else:
                waited.append((handler, task))
        results = await asyncio.gather(*(t for _, t in waited), return_exceptions=True)
        return self._merge(ctx, [(h, r) for (h, _), r in zip(waited, results, strict=True)])

    async def _one(self, handler: Handler, payload: dict[str, Any],
                   ctx: HookContext) -> HookResult:
        async with asyncio.timeout(handler.timeout):
            reply = await handler.transport.ask(dict(payload), ctx.hook_point)
        return apply_reply(reply, ctx, handler.label)

    def _merge(self, ctx: HookContext,
               answers: list[tuple[Handler, HookResult | BaseException]]) -> HookResult:
        effects: list[str] = []
        denials: list[str] = []
        failures: list[str] = []
        updated: dict[str, Any] | None = None
        context: list[str] = []
        for handler, r in answers:
            if isinstance(r, BaseException):
                if isinstance(r, asyncio.CancelledError):
                    raise r
                what = (f"timed out after {handler.timeout:g}s" if isinstance(r, TimeoutError)
                        else f"{type(r).__name__}: {r}")
                line = f"handler '{handler.label}' failed: {what}"
                effects.append(line + ("" if handler.fail_mode == "closed" else " (open)"))
                if handler.fail_mode == "closed":
                    failures.append(line)
                continue
            effects.extend(f"{handler.label}: {s}" for s in r.side_effects)
            if not r.allow:
                denials.append(r.error or f"Blocked by hook '{handler.label}'.")
            if r.modified_args is not None and updated is None:
                updated = r.modified_args
            if r.additional_context:
                context.append(r.additional_context)
        if failures:
            # Raised after every handler ran, so the failure is the registry's to apply.
            raise HookProtocolError("; ".join(failures))
        if denials:
            return HookResult(allow=False, error=" ".join(denials), side_effects=effects)
        return HookResult(modified_args=updated, side_effects=effects,
                          additional_context="\n\n".join(context) if context else None)

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.name!r} event={self.event} "
                f"handlers={len(self.handlers)}>")


class PreToolUseGroup(_Group, PreToolUseHook):
    """Claude Code's PreToolUse handlers of one settings block."""


class PostToolUseGroup(_Group, PostToolUseHook):
    """Claude Code's PostToolUse (or PostToolUseFailure) handlers of one settings block."""


class SessionStartGroup(_Group, SessionStartHook):
    """Claude Code's SessionStart handlers of one settings block."""


GROUP_CLASSES: dict[str, type[_Group]] = {
    "PreToolUse": PreToolUseGroup,
    "PostToolUse": PostToolUseGroup,
    "PostToolUseFailure": PostToolUseGroup,
    "SessionStart": SessionStartGroup,
}
