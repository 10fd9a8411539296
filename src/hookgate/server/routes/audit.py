"""The audit log over HTTP: the caller's org's tool-call rows, newest first, page by page."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from hookgate.runtime.runtime import Runtime
from hookgate.server.auth import CallerDep, RuntimeDep
from hookgate.server.responses import AuditPage
from hookgate.storage.audit import OUTCOMES, AuditLogStore

router = APIRouter(prefix="/api", tags=["audit"])


def _aware(at: datetime | None) -> datetime | None:
    # A time given without a zone is taken as UTC, the zone the log is written in.
    return at.replace(tzinfo=UTC) if at is not None and at.tzinfo is None else at


@router.get("/audit", response_model=AuditPage)
async def audit_log(
    caller: CallerDep,
    rt: RuntimeDep,
    agent_id: Annotated[str | None, Query(max_length=128)] = None,
    user_id: Annotated[str | None, Query(max_length=128)] = None,
    tool: Annotated[str | None, Query(max_length=256, description="A tool name.")] = None,
    session: Annotated[str | None, Query(
        max_length=256, description="A session id as the agent named it (an external "
                                    "agent's session, a run's conversation id).")] = None,
    outcome: Annotated[str | None, Query(description="ok, error, blocked or withheld")] = None,
    since: Annotated[datetime | None, Query(description="From this time (ISO-8601).")] = None,
    until: Annotated[datetime | None, Query(description="Before this time.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    before: Annotated[int | None, Query(ge=1, description="The next_before of the previous "
                                                           "page.")] = None,
) -> dict[str, Any]:
    """Rows of the caller's org; ``next_before`` is null on the last page.

    Each row says who decided the call (``decided_by``: a person's user id, or the standing
    rule and its creator; ``approver`` is the same value under its earlier name) and what
    they decided (``decision``: approved, rejected, expired or cancelled; null when no one
    was asked)."""
    if outcome is not None and outcome not in OUTCOMES:
        raise HTTPException(422, f"outcome must be one of {', '.join(OUTCOMES)}")
    items = await AuditLogStore.shared(rt.db).page(
        caller.org_id, limit=limit, before_id=before, agent_id=agent_id, user_id=user_id,
        tool_name=tool, outcome=outcome, since=_aware(since), until=_aware(until),
        session_id=session)
    await _with_decisions(items, rt)
    return {"items": items,
            "next_before": items[-1]["id"] if len(items) == limit else None}


async def _with_decisions(rows: list[dict[str, Any]], rt: Runtime) -> None:
    """``decided_by`` and ``decision`` on each row: a person's decision as its request
    records it; a standing rule only approves."""
    statuses: dict[str, str | None] = {}
    for row in rows:
        row["decided_by"] = row.get("approver")
        request_id = row.get("request_id")
        if request_id is not None:
            if request_id not in statuses:
                request = await rt.approvals.store.get(request_id)
                statuses[request_id] = None if request is None or request.pending \
                    else request.status
            row["decision"] = statuses[request_id]
        else:
            row["decision"] = "approved" if row.get("approver") is not None else None
