"""Runs: start one, read it, follow its events live (SSE, with Last-Event-ID replay)."""

from __future__ import annotations

import json
import weakref
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse

from hookgate.approvals.records import ConfirmationRequest
from hookgate.engines.events import RunEvent
from hookgate.engines.outcome import any_call_stopped, run_outcome
from hookgate.engines.state import RunState
from hookgate.runs.runner import UnknownAgent, UnknownEngine
from hookgate.runtime.runtime import Caller, Runtime
from hookgate.server.auth import (
    AccessDep,
    CallerDep,
    RuntimeDep,
    StreamAccessDep,
    recheck_s,
)
from hookgate.server.hot_route import HotRoute
from hookgate.server.responses import RunDetail, RunListItem, RunStarted, event_stream
from hookgate.server.schemas import StartRun
from hookgate.server.sse import Event, EventStreamResponse
from hookgate.server.trace_view import for_caller
from hookgate.storage.runs import RunSummary
from hookgate.telemetry.propagation import continue_trace

#: Every run's start and event stream are hot routes (server/hot_route.py; decision record
#: 0042): answered without FastAPI's generic per-request machinery, each refusal as before.
router = APIRouter(prefix="/api", tags=["runs"], route_class=HotRoute)


@router.post("/runs", response_model=RunStarted)
async def start_run(body: StartRun, access: AccessDep, request: Request) -> dict[str, Any]:
    caller, rt = access.caller, access.rt
    try:
        with continue_trace(request.headers):
            state = await rt.runs.start(body.agent_id, body.message,
                                        user_id=caller.user_id, org_id=caller.org_id,
                                        conversation_id=body.conversation_id,
                                        engine=body.engine)
    except UnknownAgent as exc:
        raise HTTPException(404, str(exc)) from None
    except UnknownEngine as exc:
        raise HTTPException(422, str(exc)) from None
    return {"run_id": state.run_id, "status": state.status}


@router.get("/runs", response_model=list[RunListItem])
async def list_runs(caller: CallerDep,
                    rt: RuntimeDep) -> list[dict[str, Any]]:
    rows = await rt.runs.store.list_for_org(caller.org_id)
    declined = await rt.approvals.store.declined_by_run([r.id for r in rows])
    stopped = await rt.runs.bus.log.runs_with_stopped_calls(
        [r.id for r in rows if r.status == "completed"])
    return [{"run_id": r.id, "agent_id": r.agent_id, "user_id": r.user_id, "status": r.status,
             "answer": r.answer, "created_at": r.created_at.isoformat(),
             **_approval_outcome(r.status, declined.get(r.id, []), r.id in stopped)}
            for r in rows]


def _approval_outcome(status: str, declined: list[ConfirmationRequest],
                      call_stopped: bool) -> dict[str, Any]:
    """``outcome`` says what the run came to: a run that completed although a person did not
    approve one of its calls is ``not_approved``, not a plain success (``not_approved``
    lists those calls); one in which a hook blocked a call is ``call_blocked``."""
    return {
        "outcome": run_outcome(status, not_approved=bool(declined),
                               call_stopped=call_stopped),
        "not_approved": [{"request_id": r.id, "tool_name": r.tool_name, "status": r.status,
                          "decided_by": r.responded_by} for r in declined],
    }


async def _visible(run_id: str, caller: Caller, rt: Runtime, *,
                   with_log: bool = False, after: int = 0) -> RunSummary:
    """The run's summary, if the caller's org may see the run (else 404)."""
    row = await rt.runs.store.summary(run_id, with_log=with_log, after=after)
    if row is None or row.org_id != caller.org_id:
        raise HTTPException(404, f"no run '{run_id}'")
    return row


@router.get("/runs/{run_id}", response_model=RunDetail)
async def get_run(run_id: str, access: AccessDep) -> JSONResponse:
    caller, rt = access.caller, access.rt
    # A run advancing here has its trace in memory; any other's is read with its row.
    seen = await _visible(run_id, caller, rt, with_log=run_id not in rt.runs.bus.feeds)
    state = RunState.from_json(seen.state_json)
    trace = await rt.runs.trace(run_id, state, seen.logged)
    declined: list[ConfirmationRequest] = []
    if state.status != "completed" or _asked_anyone(trace):
        # A run that completed went through the gate for every request it made, and the
        # gate puts each on the trace: with none there, there is nothing to look up.
        declined = (await rt.approvals.store.declined_by_run([state.run_id])).get(
            state.run_id, [])
    # A response of its own: FastAPI would otherwise walk the whole trace to re-encode what
    # is JSON already.
    return JSONResponse({
        "run_id": state.run_id,
        "agent_id": state.agent_id,
        "user_id": state.user_id,
        "org_id": state.org_id,
        "conversation_id": state.conversation_id,
        "engine": state.engine,
        "message": state.message,
        "status": state.status,
        "answer": state.answer,
        "error": state.error,
        "trace": for_caller(trace, caller.admin),
        **_approval_outcome(state.status, declined, any_call_stopped(trace)),
    })


def _asked_anyone(trace: list[dict[str, Any]]) -> bool:
    return any(str(e.get("type", "")).startswith("confirmation_") for e in trace)


@router.get("/runs/{run_id}/events", response_class=EventStreamResponse, status_code=200,
            responses=event_stream("the run's events (SPEC §6), each as its JSON object; "
                                   "the id is its seq"))
async def run_events(run_id: str, request: Request,
                     access: StreamAccessDep) -> EventStreamResponse:
    caller, rt = access.caller, access.rt
    raw = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
    try:
        after: int | None = int(raw) if raw else 0
    except ValueError:
        after = None  # refused after the visibility check: an unknown run is a 404 first
    bus = rt.runs.bus
    # A stream that follows the log registers for the run's wake-ups first; the visibility
    # check then reads the run's first events with its row (one statement on PostgreSQL).
    follower = bus.follow(run_id) if after is not None else None
    try:
        # A run advancing here is read from its feed: its org and the events committed so
        # far. Any other's first events come with its row (from memory too, for a run that
        # just ended here).
        live = bus.live(run_id, after or 0)
        logged: list[RunEvent] | None
        if live is not None:
            if live.org_id != caller.org_id:
                raise HTTPException(404, f"no run '{run_id}'")
            status, logged = "running", live.logged
        else:
            seen = await _visible(run_id, caller, rt, with_log=True,
                                  after=after or 0)  # its state is not needed: no parse
            status, logged = seen.status, seen.logged
    except BaseException:
        bus.unfollow(run_id, follower)
        raise
    if after is None:
        raise HTTPException(422, "Last-Event-ID must be an event number")
    start = after

    async def stream() -> AsyncIterator[Event]:
        async for event in bus.subscribe(run_id, start, status_before=status,
                                         follower=follower, logged=logged):
            yield Event(json.dumps(for_caller(event.to_dict(), caller.admin),
                                   ensure_ascii=False, default=str),
                        event=event.type, id=str(event.seq))

    events = stream()
    if follower is not None:
        # Dropped with the stream even if the response never iterates it (a client gone
        # before the headers went out); `subscribe` drops it when it ends.
        weakref.finalize(events, bus.unfollow, run_id, follower)
    # Only while the caller may see the run: a revoked token, a disabled user or one moved
    # to another org ends the stream.
    return EventStreamResponse(events, ping_s=request.app.state.keepalive_s,
                               still_allowed=access.still_allowed,
                               recheck_s=recheck_s(request))
