"""Standing rules over HTTP: list, create, read, switch between shadow and enforce, revoke
and enable again (``/api/approval-rules``), and the
rule an approver asks to remember with a decision (``remember`` on respond)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from hookgate.approvals import authority
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.errors import ApprovalError
from hookgate.approvals.records import ConfirmationRequest
from hookgate.approvals.rules import (
    RuleDraft,
    RuleInvalid,
    RuleNotFound,
    RuleRefused,
    StandingRule,
)
from hookgate.runtime.runtime import Caller, Runtime
from hookgate.server.auth import CurrentCallerDep, RuntimeDep
from hookgate.server.responses import StandingRule as StandingRuleBody
from hookgate.server.schemas import CreateRule, Remember, UpdateRule

router = APIRouter(prefix="/api", tags=["approval rules"])


def _approver(caller: Caller, via: str = "api") -> Approver:
    return Approver(caller.user_id, caller.org_id, caller.admin, via=via,
                    service=caller.service)


async def _may_govern(rt: Runtime, who: Approver) -> None:
    """403 for a caller who may create, enable or revoke no standing rule at all (a service
    identity), before anything else is read; the rest is the rule book's check."""
    why_not = await authority.never_decides(rt.db, who)
    if why_not is not None:
        raise HTTPException(403, f"not allowed: {why_not}")


def _http(exc: ApprovalError) -> HTTPException:
    if isinstance(exc, RuleNotFound):
        return HTTPException(404, str(exc))
    if isinstance(exc, RuleRefused):
        return HTTPException(403, f"not allowed: {exc}")
    return HTTPException(422, str(exc))


async def remembered_rule(rt: Runtime, request: ConfirmationRequest, remember: Remember,
                          caller: Caller, decision: str) -> StandingRule:
    """The rule a decision asks to remember, checked before the decision is made (so a
    rule that may not be made leaves the request undecided); stored once it approved."""
    await _may_govern(rt, _approver(caller))
    if decision != "approve":
        raise HTTPException(422, "'remember' goes with an approval, not a rejection")
    if request.approvals_required > 1:
        raise HTTPException(422, f"request {request.id} needs {request.approvals_required} "
                                 "approvals; a standing rule never replaces a quorum")
    agent = rt.deployment.agents.get(request.agent_id)
    if agent is None:
        raise HTTPException(422, f"agent '{request.agent_id}' is no longer configured")
    draft = RuleDraft(
        agent_id=request.agent_id, tool_name=request.tool_name, scope=remember.scope,
        run_id=request.run_id if remember.scope == "run" else None,
        user_id=request.requested_by if remember.scope in ("run", "agent_user") else None,
        when=remember.when, expires_in_s=remember.expires_in, from_request_id=request.id,
        mode=remember.mode)
    try:
        return await rt.approvals.rules.prepare(draft, agent, _approver(caller))
    except (RuleInvalid, RuleRefused) as exc:
        raise _http(exc) from None


@router.get("/approval-rules", response_model=list[StandingRuleBody])
async def list_rules(
    caller: CurrentCallerDep, rt: RuntimeDep,
    active: Annotated[bool, Query(description="only rules that can still match")] = False,
) -> list[dict[str, Any]]:
    rules = await rt.approvals.rules.list_for_org(caller.org_id, active_only=active)
    return [r.to_dict() for r in rules]


@router.post("/approval-rules", status_code=201, response_model=StandingRuleBody)
async def create_rule(body: CreateRule, caller: CurrentCallerDep, rt: RuntimeDep) -> dict[str, Any]:
    await _may_govern(rt, _approver(caller))
    agent = rt.deployment.agents.get(body.agent_id)
    if agent is None or agent.org_id != caller.org_id:
        raise HTTPException(404, f"no agent '{body.agent_id}' in your org")
    draft = RuleDraft(agent_id=body.agent_id, tool_name=body.tool_name, scope=body.scope,
                      run_id=body.run_id, user_id=body.user_id, when=body.when,
                      expires_in_s=body.expires_in, mode=body.mode)
    try:
        rule = await rt.approvals.rules.create(draft, agent, _approver(caller))
    except ApprovalError as exc:
        raise _http(exc) from None
    return rule.to_dict()


@router.get("/approval-rules/{rule_id}", response_model=StandingRuleBody)
async def get_rule(rule_id: str, caller: CurrentCallerDep, rt: RuntimeDep) -> dict[str, Any]:
    try:
        return (await rt.approvals.rules.get(rule_id, caller.org_id)).to_dict()
    except RuleNotFound as exc:
        raise _http(exc) from None


@router.patch("/approval-rules/{rule_id}", response_model=StandingRuleBody)
async def update_rule(rule_id: str, body: UpdateRule, caller: CurrentCallerDep,
                      rt: RuntimeDep) -> dict[str, Any]:
    """Switch a rule's ``mode`` (its creator or an admin): ``shadow`` never decides and
    records that it would have allowed a call; ``enforce`` decides. The next call it covers
    reads the new mode."""
    await _may_govern(rt, _approver(caller))
    try:
        return (await rt.approvals.rules.set_mode(rule_id, body.mode,
                                                  _approver(caller))).to_dict()
    except ApprovalError as exc:
        raise _http(exc) from None


@router.post("/approval-rules/{rule_id}/enable", response_model=StandingRuleBody)
async def enable_rule(rule_id: str, caller: CurrentCallerDep, rt: RuntimeDep) -> dict[str, Any]:
    """Lift a suspension (admins): a rule suspended when its creator's token was revoked
    matches again; its creator is still checked at every use."""
    await _may_govern(rt, _approver(caller))
    try:
        return (await rt.approvals.rules.enable(rule_id, _approver(caller))).to_dict()
    except ApprovalError as exc:
        raise _http(exc) from None


@router.delete("/approval-rules/{rule_id}", response_model=StandingRuleBody)
async def revoke_rule(rule_id: str, caller: CurrentCallerDep, rt: RuntimeDep) -> dict[str, Any]:
    """Revoke: from now on the rule matches nothing (its record and uses stay)."""
    await _may_govern(rt, _approver(caller))
    try:
        rule = await rt.approvals.rules.get(rule_id, caller.org_id)
        revoked = await rt.approvals.rules.revoke(
            rule_id, _approver(caller), rt.deployment.agents.get(rule.agent_id))
    except ApprovalError as exc:
        raise _http(exc) from None
    return revoked.to_dict()
