"""Workflows over HTTP: list the caller's org's workflows and start one. A workflow run is a
run like any other: ``GET /api/runs/{run_id}`` and its ``/events`` stream show it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import Field

from hookgate.runs.runner import UnknownWorkflow
from hookgate.server.auth import CallerDep, RuntimeDep
from hookgate.server.responses import RunStarted, WorkflowEntry
from hookgate.server.schemas import MAX_MESSAGE_CHARS, ApiBody
from hookgate.telemetry.propagation import continue_trace

router = APIRouter(prefix="/api", tags=["workflows"])


class StartWorkflowRun(ApiBody):
    message: str = Field(default="", max_length=MAX_MESSAGE_CHARS)
    conversation_id: str | None = Field(default=None, max_length=128)


@router.get("/workflows", response_model=list[WorkflowEntry])
async def list_workflows(caller: CallerDep, rt: RuntimeDep) -> list[dict[str, Any]]:
    runs = rt.runs
    return [{"id": w.id, "name": w.name or w.id, "description": w.description,
             "as_agent": w.as_agent, "nodes": [n.id for n in w.nodes]}
            for w in runs.workflows.values()
            if (a := runs.agents.get(w.as_agent)) is not None and a.org_id == caller.org_id]


@router.post("/workflows/{workflow_id}/runs", response_model=RunStarted)
async def start_workflow_run(workflow_id: str, body: StartWorkflowRun, caller: CallerDep,
                             rt: RuntimeDep, request: Request) -> dict[str, Any]:
    try:
        with continue_trace(request.headers):
            state = await rt.runs.start_workflow(workflow_id, body.message,
                                                 user_id=caller.user_id,
                                                 org_id=caller.org_id,
                                                 conversation_id=body.conversation_id)
    except UnknownWorkflow as exc:
        raise HTTPException(404, str(exc)) from None
    return {"run_id": state.run_id, "status": state.status}
