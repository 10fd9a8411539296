"""Gated calls as MCP tasks (the ``io.modelcontextprotocol/tasks`` extension, SEP-2663).

A client that lists the extension in a request's capabilities gets a task handle at once for
a call that needs a person, and polls ``tasks/get`` for its state: ``working`` while it waits
(``_meta`` says waiting or approved), ``completed`` with the call's result once it ran or was
refused (a rejection is a tool result with ``isError``), ``cancelled`` after ``tasks/cancel``.
The task id is the attempt's call id (see `hookgate.mcp.attempts`), so any process on the
database can answer for it, and it outlives the client's connection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import mcp_types as types
from pydantic import Field

from hookgate.storage.confirmations import ConfirmationRecord
from hookgate.storage.types import utcnow

#: The extension's identifier, in client and server capabilities.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
#: Where a task's ``_meta`` says how its approval stands.
APPROVAL_META = "io.hookgate/approval"
#: How often a client should poll a task that waits for a person.
POLL_INTERVAL_MS = 2000

_TASK_ID = re.compile(r"mcpcall-([0-9a-f]{48})-([0-9]{1,9})")

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
Approval = Literal["checking", "waiting", "approved", "rejected", "expired", "cancelled"]


class TaskIdParams(types.RequestParams):
    """The params of ``tasks/get``, ``tasks/cancel`` and ``tasks/update``."""

    task_id: str = Field(alias="taskId", max_length=128)


def run_of_task(task_id: str) -> str | None:
    """The run a task id belongs to; None when it is not one of the gateway's task ids."""
    match = _TASK_ID.fullmatch(task_id)
    return f"mcp-{match.group(1)}" if match else None


@dataclass(frozen=True, slots=True)
class TaskView:
    """What a task looks like right now."""

    task_id: str
    status: TaskStatus
    message: str
    approval: Approval
    created_at: datetime
    updated_at: datetime
    ttl_ms: int
    request_id: str | None = None
    result: types.CallToolResult | None = None

    def handle(self) -> dict[str, Any]:
        """The ``tools/call`` answer that stands for the result (``resultType: task``)."""
        return {"resultType": "task", **self._task()}

    def detailed(self) -> dict[str, Any]:
        """The ``tasks/get`` answer: the task, and its result once it has one."""
        out = self._task()
        if self.result is not None:
            out["result"] = self.result.model_dump(mode="json", by_alias=True,
                                                   exclude_none=True)
        return out

    def _task(self) -> dict[str, Any]:
        return {
            "taskId": self.task_id,
            "status": self.status,
            "statusMessage": self.message,
            "createdAt": _iso(self.created_at),
            "lastUpdatedAt": _iso(self.updated_at),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": POLL_INTERVAL_MS,
            "_meta": {APPROVAL_META: {"state": self.approval, "request_id": self.request_id}},
        }


def view_of(task_id: str, created_at: datetime, row: ConfirmationRecord | None,
            result: types.CallToolResult | None, ttl_ms: int) -> TaskView:
    """The task of an attempt: its request (None before the gate made one) and its result
    (None while there is none yet)."""
    approval: Approval = "checking"
    message = "The call is being checked by hookgate's hooks."
    request_id = None
    updated = created_at
    if row is not None:
        request_id = row.id
        updated = row.responded_at or row.created_at
        approval = "waiting" if row.status == "pending" else _decided(row.status)
        if row.status == "pending":
            message = f"Waiting for a person to approve request {row.id}."
        else:
            by = f" by {row.responded_by}" if row.responded_by else ""
            message = f"Request {row.id} was {row.status}{by}."
    status: TaskStatus = "working"
    if result is not None:
        # Cancelled by tasks/cancel, with the run, or when its card could not go out.
        status = "cancelled" if approval == "cancelled" else "completed"
        updated = utcnow()
        message += " The call finished." if not result.is_error else \
            " The call did not succeed; see its result."
    elif approval == "approved":
        message += " The call is running."
    return TaskView(task_id, status, message, approval, created_at, updated, ttl_ms,
                    request_id, result)


def unfollowed_result(row: ConfirmationRecord, kept_s: float) -> types.CallToolResult:
    """The result of a decided attempt the retry path no longer joins."""
    if row.status == "approved":
        text = (f"Error: request {row.id} was approved, but its result is no longer "
                f"available (kept {kept_s:g}s); call the tool again.")
    else:
        reason = f": {row.reason}" if row.reason else ""
        text = f"Error: request {row.id} was {row.status}{reason}; the call did not run."
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


_DECIDED: dict[str, Approval] = {s: s for s in ("approved", "rejected", "expired", "cancelled")}


def _decided(status: str) -> Approval:
    # A status this module does not know is shown as cancelled: the call does not run.
    return _DECIDED.get(status, "cancelled")


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z") if at.tzinfo else at.isoformat() + "Z"
