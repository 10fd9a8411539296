"""The client half of the tasks extension for the official `mcp` client: a result claim
for ``resultType: task`` that polls ``tasks/get`` until the task ends, and the requests a
test sends itself (the SDK ships the extension hooks, not the extension)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from pydantic import ConfigDict, Field

from hookgate.mcp.tasks import TASKS_EXTENSION


class TaskHandle(types.Result):
    """What ``tools/call`` answers when it made a task."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = Field(alias="resultType", default="task")
    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(alias="statusMessage", default=None)
    poll_interval_ms: int | None = Field(alias="pollIntervalMs", default=None)


class DetailedTask(types.Result):
    """What ``tasks/get`` answers."""

    model_config = ConfigDict(extra="allow")
    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(alias="statusMessage", default=None)
    created_at: str = Field(alias="createdAt")
    last_updated_at: str = Field(alias="lastUpdatedAt")
    poll_interval_ms: int | None = Field(alias="pollIntervalMs", default=None)
    result: dict[str, Any] | None = None

    def approval(self) -> dict[str, Any]:
        assert self.meta is not None, self
        return dict(self.meta["io.hookgate/approval"])

    def call_result(self) -> types.CallToolResult:
        assert self.result is not None, self
        return types.CallToolResult.model_validate(self.result)


class TaskIdParams(types.RequestParams):
    task_id: str = Field(alias="taskId")


class GetTask(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"


class CancelTask(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


async def get_task(session: ClientSession, task_id: str) -> DetailedTask:
    return await session.send_request(GetTask(params=TaskIdParams(taskId=task_id)),
                                      DetailedTask)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    await session.send_request(CancelTask(params=TaskIdParams(taskId=task_id)), types.EmptyResult)


class Tasks(ClientExtension):
    """Negotiates the tasks extension; ``call_tool`` then waits by polling."""

    identifier = TASKS_EXTENSION

    def __init__(self, poll_s: float = 0.2) -> None:
        self.poll_s = poll_s
        self.polls: list[DetailedTask] = []

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self._resolve)]

    async def _resolve(self, handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
        while True:
            task = await get_task(ctx.session, handle.task_id)
            self.polls.append(task)
            if task.status not in ("working", "input_required"):
                return task.call_result()
            await anyio.sleep(self.poll_s)
