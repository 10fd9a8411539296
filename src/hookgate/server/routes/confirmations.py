"""Confirmation requests: the inbox, one request's record, and deciding it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request

from hookgate.approvals import authority
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.records import STATUSES, ConfirmationRequest
from hookgate.approvals.rules import RuleBook, StandingRule
from hookgate.approvals.store import AfterTransition
from hookgate.runtime.runtime import Caller, Runtime
from hookgate.server.auth import CurrentCallerDep, RuntimeDep, StreamAccessDep, recheck_s
from hookgate.server.decisions import decide_for
from hookgate.server.responses import ConfirmationDetail, ConfirmationView, Decided, event_stream
from hookgate.server.routes.approval_rules import remembered_rule
from hookgate.server.run_history import run_history
from hookgate.server.schemas import Respond
from hookgate.server.sse import Event, EventStreamResponse
from hookgate.server.trace_view import request_for_caller
from hookgate.storage.transaction import Transaction

router = APIRouter(prefix="/api", tags=["confirmations"])


def view(request: ConfirmationRequest, caller: Caller, rt: Runtime) -> dict[str, Any]:
    """The request as ``caller`` sees it; ``request`` as `authority.counted` gave it (only
    the approvals that count now are counted)."""
    out = request_for_caller(request.to_dict(), request, caller.user_id, caller.org_id,
                             caller.admin)
    agent = rt.deployment.agents.get(request.agent_id)
    out["agent_name"] = agent.name if agent else request.agent_id
    who = Approver(caller.user_id, caller.org_id, service=caller.service)
    voted = any(a.get("user_id") == caller.user_id
                for a in (*request.approvals, *request.discounted))
    out["can_decide"] = request.pending and not voted and authority.may_decide(
        request, who, "reject")
    # Four eyes: the requester may reject their own call but not approve it.
    out["can_approve"] = out["can_decide"] and authority.may_decide(request, who, "approve")
    # Arguments can be edited only against the tool's own schema (approvals/edits.py).
    out["can_edit"] = out["can_approve"] and rt.approvals.can_edit(request)
    # The tool's JSON schema, for the inbox's form per argument (null when not editable).
    tool = rt.approvals.tool_of(request) if out["can_edit"] else None
    out["parameters"] = tool.parameters if tool is not None else None
    return out


@router.get("/confirmations", response_model=list[ConfirmationView])
async def list_confirmations(
    caller: CurrentCallerDep,
    rt: RuntimeDep,
    status: Annotated[str | None, Query(
        description="pending, approved, rejected, expired, cancelled, or all (the "
                    "default)")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> list[dict[str, Any]]:
    if status == "all":  # as `hookgate approvals list --status all`
        status = None
    if status is not None and status not in STATUSES:
        raise HTTPException(422, f"status must be one of {', '.join(STATUSES)}, or all")
    rows = await rt.approvals.store.list_for_org(org_id=caller.org_id, status=status,
                                                 limit=limit, offset=offset)
    return [view(r, caller, rt) for r in await authority.counted_all(rt.db, rows)]


@router.get("/confirmations/events", response_class=EventStreamResponse, status_code=200,
            responses=event_stream("changes of the org's requests, each a confirmation "
                                   "view"))
async def confirmation_events(request: Request,
                              access: StreamAccessDep) -> EventStreamResponse:
    """Live changes of the caller's org's requests (for the inbox page), while the caller
    may see them: the stream ends once their token is revoked, or they are disabled or
    moved to another org."""
    caller, rt = access.caller, access.rt
    queue = rt.inbox.subscribe(caller.org_id)

    async def stream() -> AsyncIterator[Event]:
        try:
            while True:
                item = await queue.get()
                # Read at the moment of use: a person moved or removed a moment ago is
                # shown not one more request of the org.
                if not await access.still_current():
                    return
                item = await authority.counted_now(rt.db, item)
                yield Event(json.dumps(view(item, caller, rt), default=str),
                            event="confirmation")
        except asyncio.CancelledError:
            raise
        finally:
            rt.inbox.unsubscribe(caller.org_id, queue)

    return EventStreamResponse(stream(), ping_s=request.app.state.keepalive_s,
                               still_allowed=access.still_allowed,
                               recheck_s=recheck_s(request))


async def _visible(request_id: str, caller: Caller, rt: Runtime) -> ConfirmationRequest:
    if "\x00" in request_id:
        # No request has one, and PostgreSQL refuses the look-up rather than finding none.
        raise HTTPException(404, "no confirmation request with that id")
    request = await rt.approvals.store.get(request_id)
    if request is None or request.org_id != caller.org_id:
        raise HTTPException(404, f"no confirmation request '{request_id}'")
    return request


@router.get("/confirmations/{request_id}", response_model=ConfirmationDetail)
async def get_confirmation(request_id: str, caller: CurrentCallerDep,
                           rt: RuntimeDep) -> dict[str, Any]:
    request = await authority.counted_now(rt.db, await _visible(request_id, caller, rt))
    out = view(request, caller, rt)
    # What the same run already did ("12,000 already paid to ACME"): shown to whoever may
    # see this request, because it is read through it.
    out["run_history"] = await run_history(request, caller, rt)
    return out


@router.post("/confirmations/{request_id}/respond", response_model=Decided)
async def respond(request_id: str, body: Respond, caller: CurrentCallerDep,
                  rt: RuntimeDep) -> dict[str, Any]:
    request = await _visible(request_id, caller, rt)
    rule = (await remembered_rule(rt, request, body.remember, caller, body.decision)
            if body.remember is not None else None)
    done = await decide_for(rt, caller, request_id, body.decision, via=body.via,
                            reason=body.reason, arguments=body.arguments,
                            message=body.message,
                            with_decision=None if rule is None else _storing(rule),
                            read=request)
    if done.error is not None or done.request is None:
        raise HTTPException(done.status_code, done.error)
    out = view(await authority.counted_now(rt.db, done.request), caller, rt)
    if rule is not None and done.request.status == "approved":
        out["rule"] = rule.to_dict()
    return out


def _storing(rule: StandingRule) -> AfterTransition:
    # The rule commits with the approval that made it, or not at all: a run the approval
    # wakes never looks for a rule that is not there yet.
    async def store(tx: Transaction, after: ConfirmationRequest) -> None:
        if after.status == "approved":
            await RuleBook.save_in(tx, rule)

    return store
