"""Shadow mode: a rule that is evaluated on every call and never changes its outcome.

The one place that records what a shadow item would have decided — a whole hook in shadow
mode (`ShadowHook`: a catalog hook, a declared hook, a Cedar policy set) or single Cedar
policies annotated ``@mode("shadow")`` — on every path (the engines, the guarded-call API,
the MCP gateway, Claude Code and the coding agents all run the hook chain of
tools/guarded.py). `record_shadow` writes each decision to the call's trace (a side effect), its
audit detail (``ctx.shadow_decisions``), the current span (`SPAN_ATTRIBUTE`) and the
``hookgate.policy.shadow.decisions`` metric. Recording, and a shadow hook's own failure or
timeout, never change the call: only enforcing items fail closed.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookContext, HookPoint, HookResult, PreToolUseHook, _Hook
from hookgate.hooks.withheld import mask_text
from hookgate.policies import metrics
from hookgate.telemetry.switch import SWITCH

log = logging.getLogger("hookgate.policies.shadow")

Mode = Literal["enforce", "shadow"]
MODES: tuple[Mode, ...] = ("enforce", "shadow")
Verdict = Literal["allow", "deny", "ask"]
#: The span attribute (a list of ``rule=verdict``) on the span current when a shadow item
#: is recorded: the hook's own span while telemetry is on.
SPAN_ATTRIBUTE = "hookgate.policy.shadow.decisions"
#: How a recorded decision starts, in the trace and the audit detail.
PREFIX = "shadow "
#: Shadow hooks run before every enforcing hook (keeping their own order among themselves),
#: on the call as it was asked: so they are evaluated on every call, also one an enforcing
#: hook blocks (a block ends the chain).
SHADOW_PRIORITY = -1_000_000_000


@dataclass(frozen=True, slots=True)
class ShadowDecision:
    """What one shadow item would have decided about one call, and why."""

    rule: str
    effect: Verdict
    why: str = ""

    def note(self) -> str:
        """``shadow policy big-payments: would deny (forbidden by big-payments)``."""
        return f"{PREFIX}{self.rule}: would {self.effect}" + (f" ({self.why})" if self.why
                                                               else "")


def mode_of(value: object, where: str, entry: object = None) -> Mode:
    """A declared ``mode``: ``enforce`` (the default) or ``shadow``; HookBuildError else.
    ``entry``: the configuration entry declaring it, whose mode a `hookgate policy reload`
    may have changed since the process started (policies/modes.py): that mode wins."""
    if entry is not None:
        from hookgate.policies.modes import live_mode

        stamped = live_mode(entry)
        if stamped is not None:
            return stamped
    if value is None:
        return "enforce"
    if value not in MODES:
        raise HookBuildError(f"{where}: 'mode' must be 'enforce' or 'shadow', got {value!r}")
    return value


def record_shadow(ctx: HookContext, decisions: Iterable[ShadowDecision], *,
                  counted: bool = True) -> list[str]:
    """Record ``decisions`` for the call in ``ctx``; the notes for the hook's side effects
    (the trace). ``counted=False``: only the audit detail's notes (decisions already counted
    for this call, recorded again on the context of its reported result). Never raises: a
    recording failure is logged, and the call goes on."""
    notes: list[str] = []
    for decision in decisions:
        try:
            note = decision.note()
            ctx.shadow_decisions.append(note)
            notes.append(note)
            if not counted:
                continue
            metrics.shadow_counted(decision.rule, decision.effect)
            if SWITCH.on:
                _on_span(decision)
        except Exception:  # recording never changes the call
            log.exception("shadow decision of %s could not be recorded", decision.rule)
    return notes


def _on_span(decision: ShadowDecision) -> None:
    from opentelemetry import trace

    span = trace.get_current_span()
    if not span.is_recording():
        return
    said = f"{decision.rule}={decision.effect}"
    attrs = getattr(span, "attributes", None) or {}
    before = attrs.get(SPAN_ATTRIBUTE) or ()
    span.set_attribute(SPAN_ATTRIBUTE, [*before, said])


def audit_text(ctx: HookContext) -> str | None:
    """What the audit row's detail adds for the shadow items: their notes, or None."""
    return "; ".join(ctx.shadow_decisions) or None


class ShadowHook(PreToolUseHook):
    """A PreToolUse hook in shadow mode: the hook runs on a copy of every call it triggers
    for and its answer is recorded — blocked: would deny; asked for a person: would ask;
    else would allow; a failure or timeout: would deny (as it would fail closed), saying
    so — while this hook always answers "allow, change nothing" beside the trace note."""

    fail_mode = "open"  # never reached: execute does not raise

    def __init__(self, inner: _Hook) -> None:
        if inner.point is not HookPoint.PRE_TOOL_USE:
            raise HookBuildError(f"hook '{inner.name or type(inner).__name__}': shadow mode "
                                 "is for PreToolUse hooks (they decide whether a call runs)")
        self.inner = inner
        self.name = inner.name or type(inner).__name__
        self.priority = SHADOW_PRIORITY + inner.priority
        #: What `hookgate check` shows: the hook's own matcher, and that it only records.
        self.matcher = f"{getattr(inner, 'matcher', None) or 'every call'} (shadow mode: " \
                       "records what it would decide)"
        self.rule = f"hook {self.name}"

    def should_trigger(self, ctx: HookContext) -> bool:
        try:
            return self.inner.should_trigger(ctx)
        except Exception:
            return True  # execute runs the hook and records its failure

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(side_effects=record_shadow(ctx, [await self.decision(ctx)]))

    async def decision(self, ctx: HookContext) -> ShadowDecision:
        """What the hook would have decided about ``ctx``, run on a copy of it."""
        try:
            trial = _copy(ctx)
            timeout = self.inner.timeout
            if timeout is None:
                result = await self.inner.execute(trial)
            else:
                async with asyncio.timeout(timeout):
                    result = await self.inner.execute(trial)
        except TimeoutError:
            return ShadowDecision(self.rule, "deny",
                                  f"it timed out after {self.inner.timeout:g}s")
        except Exception as exc:
            return ShadowDecision(self.rule, "deny", f"it failed ({type(exc).__name__})")
        if not isinstance(result, HookResult):
            return ShadowDecision(self.rule, "deny", "it returned an invalid answer")
        if not result.allow:
            return ShadowDecision(self.rule, "deny", mask_text(result.error or "blocked"))
        if trial.asked_by:
            return ShadowDecision(self.rule, "ask", "; ".join(
                mask_text(a.reason) for a in trial.asked_by if a.reason))
        return ShadowDecision(self.rule, "allow",
                              "with rewritten arguments" if result.modified_args is not None
                              else "")


def _copy(ctx: HookContext) -> HookContext:
    """A context the shadow hook may change at will: what it does stays in the copy."""
    return dataclasses.replace(
        ctx, tool_args=copy.deepcopy(ctx.tool_args), metadata=dict(ctx.facts), emit=None,
        added_context=[], asked_by=[], shadow_decisions=[], stop_run=None,
        policy_decision=None)


def shadowed(hook: Any, mode: Mode) -> Any:
    """``hook`` as declared with ``mode``: itself when enforcing, else its `ShadowHook`."""
    return hook if mode == "enforce" else ShadowHook(hook)
