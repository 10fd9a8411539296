"""The audit log over HTTP: the caller's org's tool-call rows, newest first, page by page."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

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
    outcome: Annotated[str | None, Query(description="ok, error, blocked or withheld")] = None,
    since: Annotated[datetime | None, Query(description="From this time (ISO-8601).")] = None,
    until: Annotated[datetime | None, Query(description="Before this time.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    before: Annotated[int | None, Query(ge=1, description="The next_before of the previous "
                                                           "page.")] = None,
) -> dict[str, Any]:
    """Rows of the caller's org; ``next_before`` is null on the last page."""
    if outcome is not None and outcome not in OUTCOMES:
        raise HTTPException(422, f"outcome must be one of {', '.join(OUTCOMES)}")
    items = await AuditLogStore.shared(rt.db).page(
        caller.org_id, limit=limit, before_id=before, agent_id=agent_id, user_id=user_id,
        tool_name=tool, outcome=outcome, since=_aware(since), until=_aware(until))
    return {"items": items,
            "next_before": items[-1]["id"] if len(items) == limit else None}
