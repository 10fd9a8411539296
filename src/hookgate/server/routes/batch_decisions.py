"""Deciding several requests at once (the parallel gated calls of one turn, from the inbox):
each request is still decided on its own, so eligibility, its call binding and
first-decision-wins hold per request, and the answer says what became of each."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from hookgate.approvals import authority
from hookgate.approvals.eligibility import Approver
from hookgate.server.auth import CurrentCallerDep, RuntimeDep
from hookgate.server.decisions import decide_for
from hookgate.server.responses import BatchDecided
from hookgate.server.routes.confirmations import view
from hookgate.server.schemas import RespondBatch

router = APIRouter(prefix="/api", tags=["confirmations"])


@router.post("/confirmations/batch", response_model=BatchDecided)
async def respond_batch(body: RespondBatch, caller: CurrentCallerDep,
                        rt: RuntimeDep) -> dict[str, Any]:
    if len(set(body.ids)) != len(body.ids):
        raise HTTPException(422, "ids must be distinct: each request is decided once")
    why_not = await authority.never_decides(rt.db, Approver(
        caller.user_id, caller.org_id, caller.admin, service=caller.service))
    if why_not is not None:
        # Each request would refuse it alike (approvals.decide asks the same owner).
        raise HTTPException(403, f"not allowed: {why_not}")
    results = []
    for request_id in body.ids:
        done = await decide_for(rt, caller, request_id, body.decision, via=body.via,
                                reason=body.reason, message=body.message)
        item: dict[str, Any] = {"id": request_id, "status_code": done.status_code,
                                "error": done.error}
        if done.request is not None:
            item["request"] = view(await authority.counted_now(rt.db, done.request), caller, rt)
        results.append(item)
    return {"decided": sum(1 for r in results if r["status_code"] == 200),
            "results": results}
