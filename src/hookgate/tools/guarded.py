"""The one guarded path: every tool call of every caller is a typed call (`new_call`,
tools/guarded_call.py: its arguments validated and converted there, once) that goes through
`execute_tool_call` (the engines, the MCP gateway, evals) or `decide_call` then
`observe_result` (a tool that runs elsewhere: hookgate.external).

validated call → PreToolUse chain → validate again if rewritten → after an approval, the checks
that may have changed meanwhile → approval check (run, call id, tool, agent, digest) → run
the tool (claimed in the execution ledger) → PostToolUse chain → observation. Nothing else in
hookgate invokes a tool's function; tests/test_architecture.py fails if something does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import fields
from typing import Any, Protocol

from hookgate.hooks.coverage import coverage
from hookgate.hooks.facts import FactsUnavailable, PendingProvenance, provenance_of
from hookgate.hooks.model import HookContext, HookPoint
from hookgate.hooks.registry import HookRegistry
from hookgate.hooks.trace import ChainResult, HookEvent
from hookgate.hooks.withheld import Withheld, mask_text
from hookgate.provenance import (
    PROVENANCE_KEY,
    UNTRUSTED_OUTPUT_KEY,
    Fact,
    directed_by,
    facts_session,
    trace,
)
from hookgate.telemetry.tools import traced_tool_call
from hookgate.tools.calls import CallBinding, CallIdentity, ToolCall, ToolOutcome
from hookgate.tools.errors import ToolArgumentsError
from hookgate.tools.guarded_call import GuardedCall, RefusedCall
from hookgate.tools.ledger import ExecutionLedger
from hookgate.tools.tool import Tool, args_digest

# The documented metadata keys (SPEC §1) that are read-only views of HookContext's typed
# fields (hookgate.hooks.metadata computes them); nothing writes them.
#: ``ctx.approval.binding.args_sha256``: the digest of the arguments a person approved.
APPROVED_DIGEST_KEY = "approved_args_sha256"
#: ``ctx.approval.binding``: the `CallBinding` a person approved. The call runs only if it
#: is exactly this call (run, tool call id, tool name, agent and argument digest).
APPROVED_CALL_KEY = "approved_call"
#: ``ctx.approval.rule``: "approved by rule R, created by alice".
APPROVED_BY_RULE_KEY = "approved_by_rule"
#: ``ctx.call_started``: ``time.perf_counter()`` when the call entered the hooks.
CALL_STARTED_KEY = "call_started"
#: ``ctx.approval.decision`` (who decided, the request, the wait) and
#: ``ctx.approval.decided_at`` (``time.perf_counter()`` when the decision came).
CALL_DECISION_KEY = "call_decision"
DECIDED_AT_KEY = "decided_at"
#: ``ctx.added_context``: texts hooks add next to the tool's output.
HOOK_CONTEXT_KEY = "hook_context"
#: ``ctx.stop_run``: a hook stops the whole run (Claude Code's ``continue: false``): why.
STOP_RUN_KEY = "stop_run"
#: ``ctx.asked_by``: declarative hooks that answered ``ask``, each one's name and reason.
ASKED_BY_KEY = "confirmation_asked_by"
#: ``ctx.policy_decision``: the ``cedar_policy`` hook's decision explained (effect, deciding
#: policies, reasons, policy-set version); the audit log records it with the call.
POLICY_DECISION_KEY = "policy_decision"
#: ``ctx.tool_error``: PostToolUse, the tool raised: its error, a `Withheld`.
TOOL_ERROR_KEY = "tool_error"

log = logging.getLogger("hookgate.tools")


class BlockedCallObserver(Protocol):
    """A hook (of any point) that also hears about calls that never ran.

    A call stopped before its tool runs — an unknown tool name, invalid arguments (from the
    model or a hook's rewrite), or a block by a PreToolUse hook or the approval check —
    never reaches PostToolUse. A hook
    that defines ``on_blocked`` is awaited with the context and the outcome once such a call
    is decided (the audit log records the attempt this way). It cannot change the outcome;
    a failure is added to the outcome's trace.
    """

    async def on_blocked(self, ctx: HookContext, outcome: ToolOutcome) -> None: ...


def render_observation(result: Any) -> str:
    """Turn a tool's return value into the text the model reads."""
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(result)


def build_metadata(
    identity: CallIdentity, call: ToolCall, tool: Tool | None, requires_confirmation: bool
) -> dict[str, Any]:
    """The request facts every hook can read (SPEC §1's list, and a few more)."""
    return {
        "org_id": identity.org_id,
        "conversation_id": identity.conversation_id,
        "run_id": identity.run_id,
        "tool_call_id": call.id,
        "requires_confirmation": requires_confirmation,
        "connector": tool.connector if tool is not None else None,
        "writes": tool.writes if tool is not None else False,
        "execution_path": identity.execution_path,
        "parent_agent_id": identity.parent_agent_id,
        "depth": identity.depth,
        "parent_session": identity.parent_session,
        "root_run_id": identity.root_run_id,
        "transcript_path": identity.transcript_path,
        "user_message": identity.message,
        "facts_session": facts_session(identity),
        # What the approver reads about a tool the agent does not declare itself (an MCP
        # server's, Claude Code's): the description it came with and the rules that ask.
        "tool_description": tool.description if tool is not None else None,
        "confirmation_reason": tool.confirmation_reason if tool is not None else None,
        UNTRUSTED_OUTPUT_KEY: tool.untrusted_output if tool is not None else False,
    }


def with_hook_context(observation: str, notes: list[str]) -> str:
    """The observation with the hooks' added texts after it, one paragraph each."""
    return "\n\n".join([observation, *(str(n) for n in notes)])


@traced_tool_call
async def execute_tool_call(
    call: GuardedCall | RefusedCall,
    *,
    registry: HookRegistry,
    ledger: ExecutionLedger | None = None,
    resume_at: str | None = None,
    hooks_bypassed: bool = False,
    reenter: bool = False,
) -> ToolOutcome:
    """Run one typed call (`new_call`'s) through the hooks and return what the model will see.

    ``resume_at`` restarts an interrupted PreToolUse chain at the named hook (the arguments
    of ``call`` are then the ones that hook saw; `ADMITTED`: past the whole chain).
    ``reenter``: the call was claimed before and its tool continues its own checkpointed
    work (a delegate's parked child run). ``hooks_bypassed`` is for evals only.
    """
    if isinstance(call, RefusedCall):
        requested = call.requested
        outcome = ToolOutcome(requested.id, str(requested.name), requested.args, False,
                              call.status, call.message, call.message)
        if hooks_bypassed:
            return outcome
        return await _blocked(registry, _attempt_context(requested, call.identity, call.tool),
                              call.identity, outcome)

    if hooks_bypassed:
        return await _run_tool(call.tool_call, call.tool, call.arguments, call.identity, ledger,
                               None, registry, bypass=True)

    decided = await decide_call(call, registry=registry, resume_at=resume_at)
    if isinstance(decided, ToolOutcome):
        return decided
    ctx, final_args, pre = decided
    outcome = await _run_tool(call.tool_call, call.tool, final_args, call.identity, ledger, ctx,
                              registry, reenter=reenter)
    outcome.side_effects[:0] = pre.side_effects
    outcome.hooks[:0] = pre.trace
    return outcome


async def decide_call(
    guarded: GuardedCall,
    *,
    registry: HookRegistry,
    resume_at: str | None = None,
) -> ToolOutcome | tuple[HookContext, dict[str, Any], ChainResult]:
    """The first half of the guarded path for the typed call: the PreToolUse chain, the
    check of a rewrite and the approval check. Returns the blocked outcome (observers told),
    or the context, the final arguments and the chain's result of a call that may run.
    The call's own ``metadata`` adds request facts for the hooks (such as Claude Code's).

    `execute_tool_call` runs the tool next; the tools of agents that run elsewhere
    (hookgate.external) run there, which reports back through `observe_result`.
    """
    call, tool, args = guarded.tool_call, guarded.tool, guarded.arguments
    identity, metadata = guarded.identity, guarded.metadata
    needs = identity.require_confirmation_for_all or tool.needs_confirmation(args)
    facts = build_metadata(identity, call, tool, needs)
    # Traced only when something reads it (hookgate.hooks.facts.provenance_of): a chain
    # with no provenance reader reads no facts for the call.
    facts[PROVENANCE_KEY] = PendingProvenance(_tracer(registry, identity, args))
    ctx = HookContext(
        hook_point=HookPoint.PRE_TOOL_USE,
        tool_name=tool.name,
        tool_args=args,
        agent_id=identity.agent_id,
        user_id=identity.user_id,
        metadata=({**metadata, **facts} if metadata else facts),
        emit=identity.emit,
        call_started=time.perf_counter(),
    )
    if guarded.shadow is not None:
        guarded.shadow(ctx)  # the gate rules in shadow mode: recorded, never deciding
    if registry.reads_provenance:
        try:
            await provenance_of(ctx)
        except FactsUnavailable as exc:
            msg = (f"Blocked: {exc}; '{tool.name}' did not run.")
            return await _blocked(registry, _attempt_context(call, identity, tool), identity,
                                  ToolOutcome(call.id, tool.name, args, False, "blocked", msg,
                                              msg, blocked_by="provenance"))
    # A hook should rewrite through modified_args, but one that edits ctx.tool_args in place
    # must not slip unvalidated arguments past the check below.
    seen_args = dict(args)
    if identity.settle is not None and (
            resume_at is not None or registry.runs_pre_tool_use(ctx)):
        await identity.settle()  # a hook may write, or ask a person, about this call
    pre = await registry.run_pre_tool_use(ctx, start_at=resume_at)
    hooks = pre.trace
    final_args = ctx.tool_args
    if not pre.allow:
        error = pre.error or "Blocked."
        return await _blocked(registry, ctx, identity, ToolOutcome(
            call.id, tool.name, final_args, False, "blocked", error, error,
            side_effects=list(pre.side_effects), hooks=hooks, blocked_by=pre.blocked_by,
        ), waiting=pre.waiting)

    if pre.modified_args is not None or final_args is not args or final_args != seen_args:
        try:
            final_args = guarded.rewritten(final_args).arguments
        except ToolArgumentsError as exc:
            msg = f"Error: a hook rewrote the arguments into invalid ones: {exc}"
            return await _blocked(registry, ctx, identity, ToolOutcome(
                call.id, tool.name, final_args, False, "invalid", msg, msg,
                side_effects=list(pre.side_effects), hooks=hooks,
            ))

    ctx.tool_args = final_args
    if (ctx.approval is not None and ctx.approval.binding is not None) or resume_at is not None:
        # A person took time to decide (or the chain resumed past its first hooks after an
        # interruption): the checks whose answer may have changed meanwhile run again now.
        checked = dict(final_args)
        again = await registry.recheck_pre_tool_use(ctx)
        hooks = hooks + again.trace
        refused = None if again.allow else (again.error or "Blocked.")
        if refused is None and (again.modified_args is not None or ctx.tool_args != checked):
            refused = (f"Blocked: a hook changed the arguments of '{tool.name}' when it was "
                       "checked again before running.")
        if refused is not None:
            return await _blocked(registry, ctx, identity, ToolOutcome(
                call.id, tool.name, ctx.tool_args, False, "blocked", refused, refused,
                side_effects=[*pre.side_effects, *again.side_effects], hooks=hooks,
                blocked_by=again.blocked_by or "recheck",
            ))
        pre = _joined(pre, again)

    refusal = _approval_refusal(ctx, call, tool, final_args, identity)
    if refusal is not None:
        return await _blocked(registry, ctx, identity, ToolOutcome(
            call.id, tool.name, final_args, False, "blocked", refusal, refusal,
            side_effects=list(pre.side_effects), hooks=hooks, blocked_by="approval_check",
        ))

    return ctx, final_args, pre


def _tracer(registry: HookRegistry, identity: CallIdentity, args: dict[str, Any]
            ) -> Callable[[], Awaitable[dict[str, Any]]]:
    """How the call's provenance is traced when first read: the session's facts, once."""
    async def traced() -> dict[str, Any]:
        try:
            seen = await registry.facts.facts(facts_session(identity))
        except Exception as exc:
            raise FactsUnavailable(
                f"hookgate could not read the session's facts to trace where the arguments "
                f"of the call came from ({type(exc).__name__})") from exc
        # A delegated child's message is its parent model's words, not the user's request.
        request = identity.message if identity.depth == 0 else None
        return trace(args, seen, request).as_fact()
    return traced


#: Keeps a result's fact of the session for `observe_result` in place of the registry's
#: fact store: (session, fact, the PostToolUse chain's result); raises if it cannot.
KeepFact = Callable[[str, Fact, ChainResult], Awaitable[None]]


async def observe_result(ctx: HookContext, registry: HookRegistry, result: Any,
                         error: Withheld | None, keep: KeepFact | None = None
                         ) -> ChainResult:
    """The PostToolUse chain over what a call returned (``error``: it failed). ``keep``:
    how the result's fact is kept, when the caller writes it with records of its own (the
    external core: with the call's ledger records, in one write)."""
    ctx.hook_point = HookPoint.POST_TOOL_USE
    ctx.tool_result = result
    if error is not None:
        ctx.tool_error = error
    post = await registry.run_post_tool_use(ctx)
    return await _kept_as_fact(ctx, registry, post, keep)


async def _kept_as_fact(ctx: HookContext, registry: HookRegistry,
                        post: ChainResult, keep: KeepFact | None = None) -> ChainResult:
    """Keep what the model will read of the result as a fact of the session, trusted or
    not as the tool declared (hookgate.provenance). If it cannot be kept, the model does
    not read it: a value it carries could later pass as one the session never saw."""
    if post.withheld:
        return post
    meta = ctx.facts
    session = meta.get("facts_session") or meta.get("root_run_id") or meta.get("run_id")
    untrusted = bool(meta.get(UNTRUSTED_OUTPUT_KEY)
                     or registry.untrusted_output(str(ctx.tool_name)))
    # A read the user directed (its target named in their request, which only a top-level
    # call holds); anything else counts as undirected.
    request = meta.get("user_message") if meta.get("depth") == 0 else None
    fact = Fact.result(str(ctx.tool_name), render_observation(ctx.tool_result),
                       trusted=not untrusted, call_id=meta.get("tool_call_id"),
                       directed=untrusted and directed_by(ctx.tool_args or {},
                                                          request if isinstance(request, str)
                                                          else None))
    try:
        if keep is None:
            await registry.facts.add(str(session), fact)
        else:
            await keep(str(session), fact, post)
    except Exception as exc:
        msg = (f"Error: hookgate could not keep the output of '{ctx.tool_name}' as a fact of "
               f"the session ({type(exc).__name__}), so it is withheld.")
        ctx.tool_result = msg
        ctx.output_withheld = True
        kept = ChainResult(**{f.name: getattr(post, f.name) for f in fields(ChainResult)})
        kept.withheld, kept.error, kept.blocked_by = True, msg, "provenance"
        return kept
    return post


def _joined(first: ChainResult, then: ChainResult) -> ChainResult:
    """A chain's result followed by its re-check's: both traces and both side effects."""
    joined = ChainResult(**{f.name: getattr(first, f.name) for f in fields(ChainResult)})
    joined.events = [*(first.events or ()), *(then.events or ())]
    joined.side_effects = [*first.side_effects, *then.side_effects]
    return joined


def _attempt_context(call: ToolCall, identity: CallIdentity, tool: Tool | None) -> HookContext:
    # The context of a call refused before any hook ran (unknown tool, invalid arguments):
    # only BlockedCallObserver hooks see it, to record the attempt.
    args = call.args if isinstance(call.args, dict) else {"raw_arguments": str(call.args)}
    ctx = HookContext(
        hook_point=HookPoint.PRE_TOOL_USE,
        tool_name=str(call.name),
        tool_args=args,
        agent_id=identity.agent_id,
        user_id=identity.user_id,
        metadata=build_metadata(identity, call, tool, False),
        emit=identity.emit,
        call_started=time.perf_counter(),
    )
    return ctx


async def _blocked(registry: HookRegistry, ctx: HookContext, identity: CallIdentity,
                   outcome: ToolOutcome, *, waiting: str | None = None) -> ToolOutcome:
    """Tell the hooks that observe blocked calls (see BlockedCallObserver) about this one
    (after the run's ``settle``: they may write), and say in the server log (one line,
    masked) that it was blocked; ``waiting``: the request a person is to decide, so the
    call is not run yet (the registry logged that in words of its own)."""
    outcome.stop_reason = ctx.stop_run
    if identity.settle is not None and any(
            getattr(hook, "on_blocked", None) is not None for hook in registry.hooks()):
        await identity.settle()
    if waiting is None:
        log.info("blocked %s call %s of run %s (%s, by %s): %s", outcome.tool_name,
                 outcome.tool_call_id, ctx.metadata.get("run_id"), outcome.status,
                 outcome.blocked_by or outcome.status, mask_text(str(outcome.error)))
    for hook in registry.hooks():
        observe = getattr(hook, "on_blocked", None)
        if observe is None:
            continue
        try:
            async with asyncio.timeout(hook.timeout):
                await observe(ctx, outcome)
        except Exception as exc:
            outcome.hooks.append(HookEvent(
                hook.name, hook.point, "failed",
                f"hook '{hook.name}' failed on the blocked call: {type(exc).__name__}: "
                f"{mask_text(str(exc))}",
                hook.fail_mode,
            ).to_dict())
    return outcome


def _approval_refusal(
    ctx: HookContext, call: ToolCall, tool: Tool, final_args: dict[str, Any],
    identity: CallIdentity,
) -> str | None:
    # The gate approves one exact call; it may run only if every part of it is the same.
    needs = ctx.requires_confirmation or tool.needs_confirmation(final_args)
    approved = None if ctx.approval is None else ctx.approval.binding
    if approved is None:
        if needs or identity.require_confirmation_for_all:
            return (
                f"Blocked: '{tool.name}' requires a person's approval and no approval was "
                "recorded for this call."
            )
        return None
    actual = CallBinding(identity.run_id, call.id, tool.name, identity.agent_id,
                         args_digest(final_args), identity.org_id)
    # Strict: the retry exception is taken (or not) by the gate; what may run is this call.
    cover = coverage(approved, actual)
    if cover.covered:
        return None
    if cover.differ == ("args_sha256",):
        return (
            f"Blocked: the arguments of '{tool.name}' changed after they were approved; "
            "the approved call is not the one that would run."
        )
    return f"Blocked: {cover.reason}; '{tool.name}' did not run."


async def _run_tool(
    call: ToolCall,
    tool: Tool,
    args: dict[str, Any],
    identity: CallIdentity,
    ledger: ExecutionLedger | None,
    ctx: HookContext | None,
    registry: HookRegistry,
    *,
    bypass: bool = False,
    reenter: bool = False,
) -> ToolOutcome:
    if ledger is not None:
        digest = args_digest(args)
        prior = await ledger.claim(identity.run_id, call.id, tool.name, digest)
        # ``reenter``: the tool continues its own checkpointed work (a delegate's child run,
        # whose every call has a ledger entry of its own), so its open claim is its own.
        continues = reenter and prior is not None and prior.observation is None and (
            prior.tool_name, prior.args_sha256) == (tool.name, digest)
        if prior is not None and not continues:
            if prior.observation is None:
                msg = (
                    f"Error: '{tool.name}' (call {call.id}) was started before an interruption "
                    "and its outcome is unknown; it is not run a second time."
                )
                return ToolOutcome(call.id, tool.name, args, True, "error", msg, msg)
            if prior.tool_name is not None and (prior.tool_name, prior.args_sha256) != (
                    tool.name, digest):
                msg = (
                    f"Error: call id {call.id!r} was already used in this run for another "
                    f"call ('{prior.tool_name}'); '{tool.name}' did not run."
                )
                return ToolOutcome(call.id, tool.name, args, False, "blocked", msg, msg,
                                   blocked_by="execution_ledger")
            return ToolOutcome(
                call.id, tool.name, args, True, "ok" if prior.ok else "error",
                prior.observation, None if prior.ok else prior.observation,
            )

    ok = True
    failed: Withheld | None = None
    try:
        result: Any = await tool._invoke(args)
    except Exception as exc:
        ok = False
        # The model reads what the tool said (unless a PostToolUse hook rewrites it); every
        # other place gets the fixed words naming the tool and the exception type.
        result = f"Error: tool '{tool.name}' failed: {type(exc).__name__}: {exc}"
        failed = Withheld.of(result, shown=(
            f"Error: tool '{tool.name}' failed ({type(exc).__name__})."))
    error: str | Withheld | None = failed

    if bypass or ctx is None:
        observation = render_observation(result)
        if ledger is not None:
            await ledger.finish(identity.run_id, call.id, observation, ok)
        return ToolOutcome(call.id, tool.name, args, True, "ok" if ok else "error",
                           observation, error)

    post = await observe_result(ctx, registry, result, failed)
    observation = render_observation(ctx.tool_result)
    status: Any = "ok" if ok else "error"
    if post.withheld:
        status = "withheld"
        error = post.error
    elif ctx.added_context:
        observation = with_hook_context(observation, ctx.added_context)
    if ledger is not None:
        await ledger.finish(identity.run_id, call.id, observation, ok and not post.withheld)
    return ToolOutcome(
        call.id, tool.name, args, True, status, observation, error,
        side_effects=list(post.side_effects),
        hooks=post.trace,
        blocked_by=post.blocked_by if post.withheld else None,
        stop_reason=ctx.stop_run,
    )
