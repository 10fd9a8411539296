"""`audit_log`: a hash-chained row for every tool call, blocked attempts included.

It is the last PostToolUse hook, so a row says what the model was shown; a call that never
ran (blocked by any hook or the approval check) is recorded through ``on_blocked`` (the
guarded path's BlockedCallObserver). A row that cannot be written withholds the tool's
output from the model: the hook raises, and the chain fails closed.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from hookgate.canonical import NotCanonicalJSON, canonical_json
from hookgate.catalog.builtin.params import reject_unknown_params, require_database
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookContext, HookResult, PostToolUseHook
from hookgate.hooks.withheld import secret_patterns, shown_args
from hookgate.policies.shadow import audit_text
from hookgate.storage.audit import AuditLogStore, AuditRecord
from hookgate.storage.types import utcnow
from hookgate.tools.arguments import REFUSED_KEY
from hookgate.tools.calls import CallDecision, ToolOutcome
from hookgate.tools.errors import ToolArgumentsError
from hookgate.tools.guarded import render_observation
from hookgate.tools.tool import args_digest

#: After every other PostToolUse hook: the row records the observation the model gets.
AUDIT_PRIORITY = 10_000_000
_PARAMS = ("mask",)
_ALLOW = HookResult()

#: Where records go; returns once the record is durable, raises when it cannot be written.
AuditSink = Callable[[AuditRecord], Awaitable[Any]]


class AuditLog(PostToolUseHook):
    """Writes one `connector_call_logs` row per tool call: who, what (arguments with
    secrets masked, plus the digest of the exact ones), the outcome, the result's size and
    digest, who decided the call (approver, request, the wait for the decision), a
    sub-agent's parent session and delegation depth, and the tool's own latency. ``mask``
    adds key patterns to the secret ones masked on cards.
    """

    #: It keeps nothing per call and its from_declaration reads only its params and the
    #: database: one instance serves every call (catalog.build.shared_between_calls).
    shared_between_calls = True

    name = "audit_log"
    priority = AUDIT_PRIORITY
    fail_mode = "closed"

    #: What `hookgate check` shows in its matcher column.
    matcher = "every call"

    def __init__(self, sink: AuditSink, *, mask: Iterable[str] = ()) -> None:
        self.sink = sink
        self.patterns = secret_patterns(mask)

    @classmethod
    def from_declaration(cls, params: dict[str, Any], env: Any) -> AuditLog:
        reject_unknown_params("audit_log", params, _PARAMS)
        mask = params.get("mask", [])
        if not isinstance(mask, list) or not all(isinstance(m, str) and m for m in mask):
            raise HookBuildError(f"mask must be a list of key patterns, got {mask!r}")
        store = AuditLogStore.shared(require_database("audit_log", env, "its rows"))
        return cls(store.append, mask=mask)

    async def execute(self, ctx: HookContext) -> HookResult:
        if ctx.output_withheld:
            outcome, detail = "withheld", ctx.tool_result
        elif ctx.tool_error is not None:
            outcome, detail = "error", ctx.tool_error
        else:
            outcome = "ok"
            # Who let it run: a standing rule, and the policy decision with its policies.
            said = [None if ctx.approval is None else ctx.approval.rule, ctx.policy_decision,
                    audit_text(ctx)]
            detail = "; ".join(str(s) for s in said if s is not None) or None
        observation = render_observation(ctx.tool_result).encode("utf-8", "surrogatepass")
        await self.sink(self.record(
            ctx, ctx.tool_args, outcome, None, detail,
            len(observation), hashlib.sha256(observation).hexdigest()))
        return _ALLOW

    async def on_blocked(self, ctx: HookContext, outcome: ToolOutcome) -> None:
        blocked_by = outcome.blocked_by
        if outcome.status == "invalid":
            blocked_by = "argument_validation"
        elif outcome.status == "unknown_tool":
            blocked_by = "unknown_tool"
        args = outcome.args if isinstance(outcome.args, Mapping) else ctx.tool_args
        # A withheld error is recorded as its fixed text (str), never its raw words.
        error = None if outcome.error is None else str(outcome.error)
        # What the rules in shadow mode would have decided, after what blocked the call.
        detail = "; ".join(s for s in (error, audit_text(ctx)) if s) or None
        await self.sink(self.record(ctx, args, "blocked", blocked_by, detail))

    def record(self, ctx: HookContext, args: Mapping[str, Any], outcome: str,
               blocked_by: str | None, detail: str | None, result_chars: int | None = None,
               result_sha256: str | None = None) -> AuditRecord:
        """The row for this call (pure: what the benchmark's decision-logic figure times)."""
        meta = ctx.metadata
        # The tool's time, not the person's: timed from the decision when one was awaited.
        approval = ctx.approval
        started = ctx.call_started
        if approval is not None and approval.decided_at is not None:
            started = approval.decided_at
        latency = time.perf_counter() - started if started is not None else 0.0
        decided = approval.decision if approval is not None else None
        if decided is None:
            decided = CallDecision(None, None, None)
        return AuditRecord(
            created_at=utcnow(),
            tool_name=str(ctx.tool_name),
            connector=meta.get("connector"),
            agent_id=ctx.agent_id,
            user_id=ctx.user_id,
            org_id=meta.get("org_id"),
            run_id=meta.get("run_id"),
            tool_call_id=meta.get("tool_call_id"),
            execution_path=meta.get("execution_path"),
            args_json=_args_text(shown_args(args, patterns=self.patterns)),
            args_sha256=_args_sha256(args),
            outcome=outcome,
            blocked_by=blocked_by,
            detail=_storable(detail),
            result_chars=result_chars,
            result_sha256=result_sha256,
            latency_us=max(0, round(latency * 1_000_000)),
            approver=_storable(decided.approver),
            request_id=_storable(decided.request_id),
            wait_us=decided.wait_us,
            **_delegation(meta),
            session_id=_storable(meta.get("conversation_id")),
            **_acting(meta),
        )


def _delegation(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Where a sub-agent's call sits in its delegation tree: the session that delegated to
    it and its depth (both None for a top-level call, whose row then hashes as before)."""
    depth, parent = meta.get("depth"), meta.get("parent_session")
    depth = depth if isinstance(depth, int) and not isinstance(depth, bool) and depth > 0 \
        else None
    parent = _storable(parent) if isinstance(parent, str) and parent else None
    if depth is None and parent is None:
        return {}
    return {"parent_session": parent, "depth": depth}


def _acting(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The service identity that asked a call acting for a person (``acting_service``,
    external/call.py); nothing for a call its initiator asked, whose row hashes as before."""
    service = meta.get("acting_service")
    return {"acting_service": _storable(service)} if isinstance(service, str) and service \
        else {}


def _storable(text: Any) -> str | None:
    # PostgreSQL text holds no NUL and no lone surrogate; keep both visible as escapes.
    if text is None:
        return None
    return (str(text).replace("\x00", "\\x00")
            .encode("utf-8", "backslashreplace").decode("utf-8"))


def _args_text(masked: Mapping[str, Any]) -> str:
    """The masked arguments' canonical JSON; arguments JSON cannot say exactly (a blocked
    attempt may carry them) are recorded as a stand-in holding their escaped text."""
    try:
        return canonical_json(masked)
    except NotCanonicalJSON as exc:
        return canonical_json(_stand_in(masked, str(exc)))


def _args_sha256(args: Mapping[str, Any]) -> str:
    try:
        return args_digest(args)
    except ToolArgumentsError as exc:
        return hashlib.sha256(canonical_json(_stand_in(args, str(exc))).encode()).hexdigest()


def _stand_in(args: Mapping[str, Any], reason: str) -> dict[str, str]:
    try:
        as_sent = json.dumps(args, ensure_ascii=True, sort_keys=True, default=str)
    except (ValueError, RecursionError):
        as_sent = "(not shown: it nests too deeply)"
    return {REFUSED_KEY: reason, "as_sent": as_sent}
