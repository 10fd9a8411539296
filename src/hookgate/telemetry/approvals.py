"""The ``hookgate.approval.wait`` span, the pending-approvals gauge and the wait histogram.

`timed_wait` wraps the gate's wait for a decision. The span covers this process's wait (a
run resumed after a restart waits again, in a new span); the histogram records the
request's whole life, from creation to decision, which is what a person took.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from hookgate.telemetry import names, values
from hookgate.telemetry.instruments import instruments
from hookgate.telemetry.switch import SWITCH

if TYPE_CHECKING:
    from hookgate.approvals.records import ConfirmationRequest


async def timed_wait(wait: Awaitable[ConfirmationRequest], request: ConfirmationRequest,
                     *, resumed: bool = False) -> ConfirmationRequest:
    """Await ``wait`` (the gate's wait for ``request``), traced when telemetry is on."""
    if not SWITCH.on:
        return await wait
    from opentelemetry.trace import StatusCode

    ins = instruments()
    attrs: dict[str, Any] = {
        names.APPROVAL_REQUEST_ID: request.id,
        names.APPROVAL_MODE: request.mode,
        names.APPROVAL_RESUMED: resumed,
        names.TOOL_NAME: values.name(request.tool_name),
        names.TOOL_CALL_ID: values.name(request.tool_call_id),
        names.RUN_ID: request.run_id,
    }
    if request.channel_id:
        attrs[names.APPROVAL_CHANNEL_ID] = request.channel_id
    pending_attrs = {names.APPROVAL_MODE: request.mode}
    started = time.perf_counter()
    ins.approvals_pending.add(1, pending_attrs)
    try:
        with ins.tracer.start_as_current_span(names.APPROVAL_SPAN, attributes=attrs) as span:
            decided = await wait
            span.set_attribute(names.APPROVAL_OUTCOME, decided.status)
            if decided.responded_by:
                span.set_attribute(names.APPROVAL_DECIDED_BY, values.name(decided.responded_by))
            if decided.responder_channel_identity:
                span.set_attribute(names.APPROVAL_CHANNEL_IDENTITY,
                                   values.name(decided.responder_channel_identity))
            if decided.responded_at is not None:
                whole = (decided.responded_at - decided.created_at).total_seconds()
            else:
                whole = time.perf_counter() - started
            span.set_attribute(names.APPROVAL_WAIT_S, round(whole, 3))
            if decided.status != "approved":
                span.set_attribute(names.ERROR_TYPE, decided.status)
                span.set_status(StatusCode.ERROR, values.text(decided.reason or decided.status))
    finally:
        ins.approvals_pending.add(-1, pending_attrs)
    ins.approval_wait.record(max(whole, 0.0), {names.APPROVAL_MODE: request.mode,
                                              names.APPROVAL_OUTCOME: decided.status})
    return decided
