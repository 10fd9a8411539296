"""The approval gate: the PreToolUse hook that makes a call wait for a person's decision.

It runs after every argument-rewriting hook (highest priority number), asks the approval
service for a decision on one exact call (org, agent, run, tool call id, tool, argument
digest), and records the decision as the context's typed ``approval`` (an `ApprovalOutcome`,
whose binding is the approved call); the guarded path compares it with the call about to
run once more before the tool runs. Both comparisons are hookgate.hooks.coverage's.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime
from typing import Any

from hookgate.agent import Agent
from hookgate.approvals.edits import changes, model_note
from hookgate.approvals.service import ApprovalAsk, ApprovalDecision, ApprovalService
from hookgate.hooks.approval import ApprovalOutcome, CallDecision
from hookgate.hooks.coverage import Coverage, coverage
from hookgate.hooks.facts import PROVENANCE_KEY, provenance_of
from hookgate.hooks.model import HookContext, HookResult, PreToolUseHook
from hookgate.policies.shadow import record_shadow
from hookgate.tools.tool import args_digest, legacy_args_digest

#: The gate runs last among PreToolUse hooks, after every hook that may rewrite arguments.
GATE_PRIORITY = 1_000_000


class ApprovalGate(PreToolUseHook):
    """Blocks a call that needs confirmation until a person approves these exact arguments."""

    name = "approval_gate"
    priority = GATE_PRIORITY
    fail_mode = "closed"
    timeout = None

    def __init__(self, agent: Agent | None = None, service: ApprovalService | None = None):
        self.agent = agent
        self.service = service

    @classmethod
    def from_declaration(cls, params: dict[str, Any], env: Any) -> ApprovalGate:
        if params:
            raise ValueError(
                f"the approval gate takes no params (got {', '.join(sorted(params))}); "
                "configure it on the agent (confirmation_mode, approver scope, timeout)"
            )
        return cls(agent=env.agent, service=env.services.approvals)

    def should_trigger(self, ctx: HookContext) -> bool:
        return ctx.requires_confirmation

    async def execute(self, ctx: HookContext) -> HookResult:
        if self.agent is None or self.service is None:
            return HookResult(
                allow=False,
                error=(
                    f"Blocked: '{ctx.tool_name}' needs a person's approval, but no approval "
                    "service is configured for this engine, so it cannot be asked for."
                ),
            )
        digest = args_digest(ctx.tool_args)
        ask = ApprovalAsk(
            agent=self.agent,
            run_id=str(ctx.metadata.get("run_id")),
            tool_call_id=str(ctx.metadata.get("tool_call_id")),
            tool_name=str(ctx.tool_name),
            args=dict(ctx.tool_args),
            args_sha256=digest,
            user_id=ctx.user_id,
            org_id=ctx.metadata.get("org_id"),
            conversation_id=ctx.metadata.get("conversation_id"),
            metadata=dict(ctx.metadata),
            emit=ctx.emit,
            asked_by=list(ctx.asked_by),
            # Standing rules in shadow mode: recorded on this call's context, never deciding.
            on_shadow=lambda decisions, counted: record_shadow(ctx, decisions,
                                                               counted=counted),
        )

        async def traced() -> None:
            # Standing rules and quorums may read the call's provenance when it is judged
            # anew: traced then if no hook before read it. A call resumed at its decided
            # request reads no facts for it.
            await provenance_of(ctx)
            if PROVENANCE_KEY in ctx.metadata:
                ask.metadata[PROVENANCE_KEY] = ctx.metadata[PROVENANCE_KEY]

        ask.complete = traced
        decision = await self.service.request_and_wait(ask)
        # Only a decision about this very call is recorded as its decision: the one
        # comparison (hookgate.hooks.coverage), with the retry exception only when the
        # service joined an identical call's request under it.
        cover = coverage(decision.binding, ask.binding, retry=decision.retry)
        ours = decision.repeat_of is not None or cover.covered
        ctx.approval = outcome = ApprovalOutcome(
            status=decision.status, request_id=decision.request_id,
            decision=call_decision(decision) if ours else None, reason=decision.reason,
            decided_at=time.perf_counter())
        who = f" by {decision.decided_by}" if decision.decided_by else ""
        if decision.repeat_of is not None:
            # Only ever a refusal (it names an earlier request of another call), so it is
            # answered before the binding check, which is about what may authorise a call.
            why = f": {decision.reason}" if decision.reason else ""
            return HookResult(
                allow=False,
                error=(
                    f"Refused without asking again: '{ctx.tool_name}' with these exact "
                    f"arguments was already rejected{who} in this run (request "
                    f"{decision.repeat_of}){why}. The call did not run; do not retry it."
                ),
                side_effects=[f"repeat of rejected request {decision.repeat_of}: refused "
                              "without asking"],
            )
        if not cover.covered:
            if _pinned_before_upgrade(ask, decision, cover.differ):
                return HookResult(allow=False, error=(
                    f"Blocked: request {decision.request_id} for '{ctx.tool_name}' was made "
                    "before this hookgate changed how it pins approved arguments (RFC 8785), "
                    "so its decision cannot be matched to this call and does not authorise "
                    "it. The call did not run; call the tool again to ask for a new "
                    "approval."))
            return HookResult(allow=False, error=_not_this_call(ask, decision, cover))
        if decision.status == "approved":
            if decision.edited_args is not None:
                return _approved_with_edits(ctx, outcome, ask, decision, who)
            rule = str(decision.reason) if decision.rule_id is not None else None
            ctx.approval = replace(outcome, binding=ask.binding, rule=rule)
            if rule is not None:
                return HookResult(side_effects=[str(decision.reason)])
            if decision.message:
                _tell_model(ctx, model_note(decision.request_id, decision.decided_by, [],
                                            decision.message))
            return HookResult(
                side_effects=[f"request {decision.request_id} approved{who}"],
            )
        reason = f": {decision.reason}" if decision.reason else ""
        said = (f" Message from {decision.decided_by or 'the approver'}: {decision.message}"
                if decision.message else "")
        return HookResult(
            allow=False,
            error=(
                f"Not approved: '{ctx.tool_name}' was {decision.status}{who} "
                f"(request {decision.request_id}){reason}. The call did not run.{said}"
            ),
            side_effects=[f"request {decision.request_id} {decision.status}{who}"],
        )


def call_decision(decision: ApprovalDecision) -> CallDecision:
    """What the audit log records about ``decision``: who decided (a standing rule as
    ``rule ar_… (created by alice)``), the request and how long it waited for the decision
    (none for a rule, or a refusal repeated without asking)."""
    if decision.rule_id is not None:
        return CallDecision(f"rule {decision.rule_id} (created by {decision.decided_by})",
                            None, None)
    if decision.repeat_of is not None:
        return CallDecision(decision.decided_by, decision.repeat_of, None)
    approver = decision.decided_by
    if approver is not None and (decision.decided_identity or "").startswith("oidc:"):
        # A person a provider verified: the row names that identity, hashed with it.
        approver = f"{approver} ({decision.decided_identity})"
    return CallDecision(approver, decision.request_id,
                        _wait_us(decision.requested_at, decision.responded_at))


def _wait_us(requested_at: str | None, responded_at: str | None) -> int | None:
    if requested_at is None or responded_at is None:
        return None
    waited = datetime.fromisoformat(responded_at) - datetime.fromisoformat(requested_at)
    return max(0, round(waited.total_seconds() * 1_000_000))


def _approved_with_edits(ctx: HookContext, outcome: ApprovalOutcome, ask: ApprovalAsk,
                         decision: ApprovalDecision, who: str) -> HookResult:
    """The approver changed the arguments: the call goes on with exactly those, bound by
    their digest (the guarded path validates, rechecks and compares them once more)."""
    edited = dict(decision.edited_args or {})
    digest = args_digest(edited)
    if digest != decision.edited_args_sha256:
        return HookResult(allow=False, error=(
            f"Blocked: the edited arguments of request {decision.request_id} are not the ones "
            "the approver approved (their digest differs); the call did not run."))
    binding = replace(ask.binding, args_sha256=digest)
    ctx.approval = replace(outcome, binding=binding, edited_args=edited)
    found = changes(ask.args, edited)
    _tell_model(ctx, model_note(decision.request_id, decision.decided_by, found,
                                decision.message))
    return HookResult(
        modified_args=edited,
        side_effects=[f"request {decision.request_id} approved{who} with edited arguments"],
    )


def _tell_model(ctx: HookContext, note: str) -> None:
    # Read next to the tool's result (and as Claude Code's additionalContext).
    ctx.added_context.append(note)


def _pinned_before_upgrade(ask: ApprovalAsk, decision: ApprovalDecision,
                           differ: tuple[str, ...]) -> bool:
    """The decision is about this very call but for its argument digest, which its request
    pinned the way hookgate did before RFC 8785: it fails closed, and says so."""
    other = decision.binding
    return (other is not None and differ == ("args_sha256",)
            and other.args_sha256 == legacy_args_digest(ask.args))


def _not_this_call(ask: ApprovalAsk, decision: ApprovalDecision, cover: Coverage) -> str:
    # A call id the model re-used for another call finds the first call's request; that
    # decision is not this call's, and nobody was asked about this one.
    other = decision.binding
    if other is None:
        return (f"Blocked: the decision on request {decision.request_id} does not say which "
                f"call it is for, so it cannot authorise this '{ask.tool_name}' call.")
    if "tool_call_id" in cover.differ:
        return (f"Blocked: {cover.reason}; request {decision.request_id} does not authorise "
                f"this '{ask.tool_name}' call, which did not run.")
    was = f" for '{other.tool_name}' (agent '{other.agent_id}')"
    return (
        f"Blocked: tool call id {ask.tool_call_id!r} was already used in this run{was}; "
        f"request {decision.request_id} belongs to that call, not to this '{ask.tool_name}' "
        "call. The call did not run; call the tool again with a new tool call id."
    )
