"""HookContext.metadata: the request facts plus read-only views of the typed fields."""

from __future__ import annotations

import pytest

from hookgate.hooks.approval import ApprovalOutcome, CallBinding, CallDecision
from hookgate.hooks.model import HookContext, HookPoint

FACTS = {"org_id": "acme", "run_id": "run_1", "tool_call_id": "c1",
         "requires_confirmation": False}


def test_the_documented_keys_show_what_the_typed_fields_say() -> None:
    ctx = HookContext(HookPoint.PRE_TOOL_USE, tool_name="pay", metadata=FACTS)
    binding = CallBinding("run_1", "c1", "pay", "buyer", "d" * 64)
    decided = CallDecision("alice", "cr_1", 12)
    ctx.approval = ApprovalOutcome("approved", "cr_1", binding=binding, decision=decided,
                                   rule="approved by rule ar_1", decided_at=1.5)
    ctx.added_context.append("note")
    ctx.stop_run = "stop"
    ctx.ask_for_confirmation("policy", "large amount")
    ctx.call_started = 1.0

    meta = ctx.metadata
    assert meta["approved_call"] is binding and meta["approved_args_sha256"] == "d" * 64
    assert meta["approved_by_rule"] == "approved by rule ar_1"
    assert meta["call_decision"] is decided and meta["decided_at"] == 1.5
    assert meta["hook_context"] == ["note"] and meta["stop_run"] == "stop"
    assert meta["confirmation_asked_by"] == [{"hook": "policy", "reason": "large amount"}]
    assert meta["requires_confirmation"] is True and meta["call_started"] == 1.0
    assert meta["org_id"] == "acme" and ctx.approval.approver == "alice"
    assert "tool_error" not in meta and "output_withheld" not in meta


def test_metadata_cannot_be_written_and_a_fact_cannot_pose_as_an_approval() -> None:
    ctx = HookContext(HookPoint.PRE_TOOL_USE, metadata={**FACTS, "approved_call": "forged"})
    assert "approved_call" not in ctx.metadata and ctx.approval is None
    with pytest.raises(TypeError, match="read-only"):
        ctx.metadata["approved_call"] = "forged"  # type: ignore[index]
    assert dict(ctx.metadata) == FACTS


def test_a_context_is_freed_when_dropped_and_its_view_outliving_it_refuses() -> None:
    # The view refers back to its context weakly: the pair is no reference cycle, so a
    # context (and the run's objects it reaches) goes as soon as the last reference does,
    # not at the garbage collector's next pass.
    import gc
    import weakref

    gc.disable()
    try:
        ctx = HookContext(HookPoint.PRE_TOOL_USE, tool_name="t",
                          metadata={"org_id": "acme", "run_id": "run_1"})
        ctx.stop_run = "stop"
        view = ctx.metadata
        assert view["stop_run"] == "stop" and view["org_id"] == "acme"
        gone = weakref.ref(ctx)
        del ctx
        assert gone() is None
    finally:
        gc.enable()
    assert view["org_id"] == "acme"  # a fact is the view's own
    with pytest.raises(ReferenceError, match="no longer exists"):
        view["stop_run"]
