"""Run events are typed per event type and travel in the same wire shape as before."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hookgate.engines.events import (
    EVENT_CLASSES,
    Done,
    OtherEvent,
    RunError,
    RunEvent,
    StepSkipped,
    ToolResult,
    decode,
    event_of,
)
from hookgate.tools.calls import ToolOutcome

OUTCOME = ToolOutcome("c1", "oa__pay", {"amount": 5}, True, "ok", "paid", None).to_dict()

WIRE: list[dict[str, Any]] = [
    {"type": "session_start", "seq": 1, "agent_id": "buyer", "allowed": True, "error": None,
     "additional_context": None},
    {"type": "model_turn", "seq": 2, "step": 1, "tool_calls": [{"id": "c1", "name": "oa__pay",
                                                                "args": {"amount": 5}}]},
    {"type": "tool_call", "seq": 3, "tool_call_id": "c1", "tool_name": "oa__pay",
     "args": {"amount": 5}},
    {"type": "confirmation_pending", "seq": 4, "request_id": "cr_1", "tool_call_id": "c1",
     "tool_name": "oa__pay", "args": {"amount": 5}, "mode": "inline", "channel_id": None,
     "approver_scope": "initiator", "expires_at": "2026-01-01T00:00:00+00:00",
     "resumed": False},
    {"type": "confirmation_resolved", "seq": 5, "request_id": "cr_1", "tool_call_id": "c1",
     "tool_name": "oa__pay", "status": "approved", "decided_by": "alice", "reason": None,
     "changes": None, "message": None},
    {"type": "tool_result", "seq": 6, **OUTCOME},
    {"type": "answer", "seq": 7, "answer": "paid"},
    {"type": "done", "seq": 8, "status": "completed", "answer": "paid"},
    {"type": "error", "seq": 9, "error": "x", "status": "failed", "hooks_bypassed": True},
    {"type": "step_result", "seq": 10, "step_id": "s1", "kind": "tool", "status": "ok"},
    {"type": "done", "seq": 11, "answer": None, "status": "failed"},  # keys in another order
    {"type": "step_skipped", "seq": 12, "node_id": "n1", "reason": "r"},
]


@pytest.mark.parametrize("wire", WIRE, ids=[f"{w['seq']}-{w['type']}" for w in WIRE])
def test_every_event_decodes_and_encodes_back_to_the_same_bytes(wire: dict[str, Any]) -> None:
    event = decode(wire)
    assert json.dumps(event.to_dict()) == json.dumps(wire)
    assert event.data == {k: v for k, v in wire.items() if k not in ("type", "seq")}
    assert event.type == wire["type"] and event.seq == wire["seq"]


def test_each_declared_type_decodes_to_its_own_class_and_others_stay_as_they_came() -> None:
    kinds = {w["seq"]: type(decode(w)) for w in WIRE}
    assert kinds[6] is ToolResult and kinds[8] is Done and kinds[9] is RunError
    assert kinds[10] is OtherEvent and kinds[11] is Done
    assert set(EVENT_CLASSES) == {"session_start", "model_turn", "tool_call", "tool_result",
                                  "tool_blocked", "confirmation_pending",
                                  "confirmation_resolved", "answer", "error", "done", "plan",
                                  "step_skipped", "delegate_start", "delegate_end",
                                  "standing_rule_skipped"}


def test_typed_attributes_read_the_payload_and_the_old_call_shape_still_decodes() -> None:
    error = event_of("error", {"error": "boom", "status": "failed", "hooks_bypassed": True}, 3)
    assert isinstance(error, RunError) and (error.error, error.status) == ("boom", "failed")
    result = RunEvent("tool_result", dict(OUTCOME), 4)
    assert isinstance(result, ToolResult) and result.observation == "paid"
    assert result.allowed is True and result.blocked_by is None
    skipped = event_of("step_skipped", {"node_id": "n1", "reason": "upstream failed"})
    assert isinstance(skipped, StepSkipped) and skipped.reason == "upstream failed"
    assert Done("done", {"status": "completed", "answer": "ok"}, 5).to_dict() == {
        "type": "done", "seq": 5, "status": "completed", "answer": "ok"}
