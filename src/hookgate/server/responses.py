"""What the HTTP API answers: one pydantic model per response shape, named by every route's
``response_model`` so that the OpenAPI description documents each 2xx response.

The models describe the fields every answer has; ``extra="allow"`` keeps any further field
a route adds (a view grows fields without breaking the description). Values are taken as
they come (no coercion): a model documents, it does not rewrite.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ApiResponse(BaseModel):
    """The base of every JSON answer: documented fields, further fields kept."""

    model_config = ConfigDict(extra="allow")


class RunStarted(ApiResponse):
    """A run was queued (``POST /api/runs``, ``POST /api/workflows/{id}/runs``)."""

    run_id: str
    status: str = Field(description="running, or the run's status if it already ended")


class NotApproved(ApiResponse):
    request_id: str
    tool_name: str
    status: str = Field(description="rejected, expired or cancelled")
    decided_by: str | None


class RunListItem(ApiResponse):
    run_id: str
    agent_id: str
    user_id: str | None
    status: str
    answer: str | None
    created_at: str
    outcome: str = Field(description="what the run came to: completed, not_approved, "
                                     "call_blocked, failed, …")
    not_approved: list[NotApproved]


class RunDetail(ApiResponse):
    """A run with its trace (admins see the raw output of failed hooks; others do not)."""

    run_id: str
    agent_id: str
    user_id: str | None
    org_id: str | None
    conversation_id: str | None
    engine: str
    message: str
    status: str
    answer: str | None
    error: str | None
    trace: list[dict[str, Any]] = Field(description="the run's events in order")
    outcome: str
    not_approved: list[NotApproved]


class ConfirmationView(ApiResponse):
    """A confirmation request as the caller sees it."""

    id: str
    run_id: str
    tool_call_id: str
    agent_id: str
    agent_name: str
    requested_by: str | None
    org_id: str | None
    mode: str = Field(description="inline or channel")
    channel_id: str | None
    approver_scope: str
    status: str = Field(description="pending, approved, rejected, expired or cancelled")
    payload: dict[str, Any] = Field(description="tool_name, the exact args and their digest")
    created_at: str
    expires_at: str
    decision: dict[str, Any]
    approvals: dict[str, Any]
    can_decide: bool
    can_approve: bool
    can_edit: bool
    parameters: dict[str, Any] | None = Field(
        None, description="the tool's JSON schema, to edit the arguments by (when can_edit)")


class ConfirmationDetail(ConfirmationView):
    """One request, with what its run already did."""

    run_history: Any


class StandingRule(ApiResponse):
    """A standing approval rule."""

    id: str
    org_id: str
    agent_id: str
    tool_name: str
    scope: str = Field(description="run, agent_user or org")
    run_id: str | None
    user_id: str | None
    when: str | None
    created_by: str
    active: bool
    mode: str = Field(description="shadow (records that it would allow, never decides) "
                                  "or enforce")


class Decided(ConfirmationView):
    """The request after the decision; ``rule``: the standing rule it made, if any."""


class BatchItem(ApiResponse):
    id: str
    status_code: int = Field(description="what deciding this one request alone answered")
    error: str | None


class BatchDecided(ApiResponse):
    decided: int = Field(description="how many requests this decision decided")
    results: list[BatchItem]


class HookEntry(ApiResponse):
    name: str
    aliases: list[str]
    description: str
    source: str
    target: str | None


class Me(ApiResponse):
    user_id: str
    org_id: str
    admin: bool
    name: str | None


class AgentEntry(ApiResponse):
    id: str
    name: str
    tools: list[str]
    confirmation_mode: str
    broken: bool = Field(description="served although its hooks or model do not build")
    error: str | None


class AuditPage(ApiResponse):
    items: list[dict[str, Any]]
    next_before: int | None = Field(description="the next page's before; null on the last")


class OrgReadOnly(ApiResponse):
    org_id: str
    read_only: bool


class UserEntry(ApiResponse):
    id: str
    admin: bool
    disabled: bool
    declared: bool
    has_token: bool
    token_expires_at: str | None


class Revoked(ApiResponse):
    user_id: str
    revoked: bool = Field(description="false when the user had no token to revoke")


class WorkflowEntry(ApiResponse):
    id: str
    name: str
    description: str | None
    as_agent: str
    nodes: list[str]


class McpServer(ApiResponse):
    id: str
    running: bool
    starts: int


class McpServerRestarted(McpServer):
    tools: list[str]


class ClaudeCodeAnswer(ApiResponse):
    """Claude Code's hook output (``hookSpecificOutput``, ``continue``, ``stopReason``,
    ``decision`` …), exactly as Claude Code reads it; see docs/guides on Claude Code."""


#: The ``responses`` entry of a route that streams server-sent events.
def event_stream(what: str) -> dict[int | str, dict[str, Any]]:
    return {200: {"description": what, "content": {"text/event-stream": {"schema": {
        "type": "string",
        "description": "server-sent events: each data line is one JSON object"}}}}}
