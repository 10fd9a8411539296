"""The guarded-call API (SPEC §8) for agents that run elsewhere: ``POST /api/v1/sessions``,
``POST /api/v1/calls``, ``GET /api/v1/calls/{id}?wait=S`` (long-poll) and
``POST /api/v1/calls/{id}/result``, and ``GET /api/v1/calls/{id}/events`` (the SSE form of
waiting: it says when a person decided). The bearer token is the agent's hookgate token (a
service identity's: its ``acts_for`` names the person a session or call acts for, checked by
``authority.acting_for`` at every ask; that person is the call's initiator, while the call,
its waits and its reports stay the token's user's); the
framework is named by the ``X-Hookgate-Framework`` header (hook metadata only: it decides
nothing). This module is a codec: it turns HTTP into the guarded-call API's calls
(external/calls.py) and back, and never reaches past the external core.

Fail closed: a call hookgate cannot decide is answered ``deny`` with the reason, never with
a status a client could read as "go on"; bad input is a 4xx that names the problem.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, HTTPException, Query, Request
from pydantic import BaseModel, Field

from hookgate.approvals.authority import NotActingFor, acting_for
from hookgate.external.calls import (
    FRAMEWORKS_MAX,
    Asker,
    CallAnswer,
    CallIdReused,
    CallNotFound,
    CallRefused,
)
from hookgate.runtime.access_watch import AccessEnded, while_allowed
from hookgate.runtime.auth import same_access
from hookgate.server.auth import LastingAccess, LastingAccessDep, StreamAccessDep, recheck_s
from hookgate.server.hot_route import HotRoute
from hookgate.server.responses import event_stream
from hookgate.server.schemas import ActsFor
from hookgate.server.sse import Event, EventStreamResponse

router = APIRouter(prefix="/api/v1", tags=["guarded calls"], route_class=HotRoute)
log = logging.getLogger(__name__)
#: The longest long-poll one request may ask for.
MAX_WAIT_S = 300.0
FrameworkHeader = Annotated[str, Header(
    alias="X-Hookgate-Framework", max_length=FRAMEWORKS_MAX,
    description="The agent framework asking (langgraph, openai-agents, pydantic-ai, adk, "
                "crewai, ...); given to the hooks as metadata.framework. It decides nothing: "
                "a tool's connector comes from its declaration or the agent's rules.")]


class SessionIn(BaseModel):
    agent: str = Field(min_length=1, max_length=128, description="The hookgate agent.")
    session_id: str = Field(min_length=1, max_length=256,
                            description="The framework's session or thread id.")
    parent_session: str | None = Field(None, max_length=256,
                                       description="The session of the agent that delegated "
                                                   "to this one (sub-agents).")
    request: str | None = Field(
        None, max_length=1_000_000,
        description="What the user asked the agent (a top-level session's): a trusted fact "
                    "of the session, so a value the user gave is never traced as coming "
                    "only from untrusted content (hookgate.provenance).")
    acts_for: ActsFor


class SessionOut(BaseModel):
    session_id: str
    context: str | None = Field(description="Text the SessionStart hooks add for the model.")
    stopped: str | None = Field(None, description="Why hookgate stopped the session; every "
                                                  "call of it is then denied.")


class CallIn(BaseModel):
    agent: str = Field(min_length=1, max_length=128)
    session_id: str = Field(min_length=1, max_length=256)
    call_id: str = Field(min_length=1, max_length=100,
                         description="The framework's id of this tool call; it names one "
                                     "call (same tool, same arguments) for good.")
    tool: str = Field(min_length=1, max_length=256)
    arguments: dict[str, Any] = Field(description="The arguments the model gave (no NaN or "
                                                  "Infinity: they have no canonical form).")
    description: str | None = Field(None, max_length=4096,
                                    description="The tool's description (shown to approvers).")
    parameters: dict[str, Any] | None = Field(
        None, description="The tool's JSON schema (type object): the arguments and an "
                          "approver's edits are checked against it; without it a person may "
                          "approve or reject the call, not edit it.")
    parent_session: str | None = Field(None, max_length=256)
    acts_for: ActsFor


class CallOut(BaseModel):
    call: str = Field(description="hookgate's id of the call, for wait and result.")
    decision: Literal["allow", "deny", "pending", "already_ran", "decided"] = Field(
        description="allow: run with `arguments`; deny: do not run, tell the model "
                    "`reason`; pending: a person decides request `request_id` (wait on "
                    "GET /api/v1/calls/{call}?wait=S); already_ran: this call started "
                    "before, here is its `observation` (do not run it again); decided (only "
                    "with peek=true): a person decided (`approved`), nothing started.")
    arguments: dict[str, Any] | None = Field(
        None, description="allow: the arguments to run with (rewritten or edited); decided "
                          "and approved: the arguments the person approved (their edit, if "
                          "any).")
    note: str | None = Field(None, description="What to tell the model about the decision.")
    reason: str | None = None
    request_id: str | None = None
    observation: str | None = None
    approved: bool | None = Field(None, description="With `decided`: whether it was approved.")


class ResultIn(BaseModel):
    output: Any = Field(None, description="What the tool returned (any JSON).")
    error: str | None = Field(None, max_length=65536,
                              description="The tool failed with this error.")


class ObservationOut(BaseModel):
    call: str
    text: str = Field(description="What the model may see: rewritten, truncated or the fixed "
                                  "withheld text.")
    withheld: bool


def _out(answer: CallAnswer) -> CallOut:
    return CallOut(call=answer.call, decision=answer.decision, arguments=answer.arguments,
                   note=answer.note, reason=answer.reason, request_id=answer.request_id,
                   observation=answer.observation, approved=answer.approved)


def _agent(access: LastingAccess, agent_id: str) -> Any:
    found = access.rt.runs.agents.get(agent_id)
    if found is None or found.org_id != access.caller.org_id:
        raise HTTPException(404, f"no agent '{agent_id}' in org '{access.caller.org_id}'")
    return found


def _asker(access: LastingAccess, framework: str, initiator: str | None = None) -> Asker:
    # The token is resolved for this request (through the token cache); at each moment of
    # use (a wait that wakes, a call about to start, a report) it is read again from the
    # database: the same user, in the same org, with no right lost.
    async def fresh() -> bool:
        now = await access.rt.authenticate(access.token)
        return now is not None and same_access(now, access.caller)

    return Asker(access.caller.user_id, access.caller.org_id, framework, still_allowed=fresh,
                 initiator=initiator)


async def _acting(access: LastingAccess, framework: str, acts_for: str | None) -> Asker:
    """The asker of an ask or a session start, with whom it acts for (its initiator); 403
    with the reason when ``acts_for`` names nobody the token's user may act for."""
    caller = access.caller
    try:
        initiator = await acting_for(access.rt.db, caller.user_id, caller.org_id,
                                     caller.service, acts_for)
    except NotActingFor as exc:
        raise HTTPException(403, str(exc)) from None
    return _asker(access, framework, initiator)


@router.post("/sessions", response_model=SessionOut)
async def start_session(body: SessionIn, access: LastingAccessDep,
                        framework: FrameworkHeader = "api") -> SessionOut:
    """An external agent's session starts: its SessionStart hooks run; the answer carries
    the context they add (or why they stopped the session)."""
    agent = _agent(access, body.agent)
    asker = await _acting(access, framework, body.acts_for)
    try:
        answer = await access.rt.guarded.start_session(agent, asker, body.session_id,
                                                       body.parent_session,
                                                       request=body.request)
    except CallRefused as exc:
        raise HTTPException(400, str(exc)) from None
    return SessionOut(session_id=answer.session_id, context=answer.context,
                      stopped=answer.stopped)


@router.post("/calls", response_model=CallOut)
async def ask(body: CallIn, access: LastingAccessDep,
              framework: FrameworkHeader = "api") -> CallOut:
    """Before a tool call: the PreToolUse hooks, the read-only guard, rate limits and the
    approval gate. A call a person must decide is answered ``pending`` at once."""
    agent = _agent(access, body.agent)
    asker = await _acting(access, framework, body.acts_for)
    try:
        answer = await access.rt.guarded.ask(
            agent, asker, session_id=body.session_id,
            call_id=body.call_id, tool=body.tool, arguments=body.arguments,
            parent_session=body.parent_session, description=body.description,
            parameters=body.parameters)
    except CallNotFound as exc:
        raise HTTPException(404, str(exc)) from None
    except CallIdReused as exc:
        raise HTTPException(409, str(exc)) from None
    except CallRefused as exc:
        raise HTTPException(400, str(exc)) from None
    except Exception as exc:
        log.exception("guarded call %s of agent %s failed", body.call_id, body.agent)
        return CallOut(call="", decision="deny", reason=f"hookgate could not decide this call "
                                                        f"({type(exc).__name__}), so it does "
                                                        "not run")
    return _out(answer)


@router.get("/calls/{call}", response_model=CallOut)
async def call_state(
    call: str, request: Request, access: LastingAccessDep,
    wait: Annotated[float, Query(ge=0, le=MAX_WAIT_S, allow_inf_nan=False,
                                 description="Seconds to wait for a person's decision "
                                             "(long-poll); 0 answers at once.")] = 0.0,
    peek: Annotated[bool, Query(description="Only report a person's decision: the call "
                                            "neither starts nor uses its approval (for "
                                            "resuming a paused agent, which then asks "
                                            "again).")] = False,
    framework: FrameworkHeader = "api",
) -> CallOut:
    """The call's state; with ``wait``, answered once it is decided or when the wait ends
    (still ``pending``). Asking about a call that started answers ``already_ran``."""
    try:
        asker = _asker(access, framework)
        async def listening() -> bool:
            return not await request.is_disconnected()

        agents = access.rt.runs.agents
        work = access.rt.guarded.peek(asker, call, wait, agents) if peek else \
            access.rt.guarded.wait(agents, asker, call, wait, listening)
        answer = await while_allowed(work,
            access.still_allowed, recheck_s(request))
    except CallNotFound as exc:
        raise HTTPException(404, str(exc)) from None
    except CallRefused as exc:
        raise HTTPException(409, str(exc)) from None
    except AccessEnded as ended:
        return CallOut(call=call, decision="deny", reason=f"hookgate: {ended} while this call "
                                                          "waited, so it does not run")
    return _out(answer)


@router.get("/calls/{call}/events", response_class=EventStreamResponse, status_code=200,
            responses=event_stream("`pending`, then `decided` or `already_ran`; each event's "
                                   "data is the body of GET /api/v1/calls/{call}?peek=true"))
async def call_events(call: str, request: Request, access: StreamAccessDep,
                      framework: FrameworkHeader = "api") -> EventStreamResponse:
    """The SSE form of waiting: an event with the call's state now (``pending``,
    ``decided`` or ``already_ran``, the body of ``GET ...?peek=true``), then one when a
    person decides, and the stream ends. It starts nothing: ask again (``POST
    /api/v1/calls`` or ``GET /api/v1/calls/{call}``) for the verdict that runs it."""
    asker = _asker(access, framework)
    try:
        first = await access.rt.guarded.peek(asker, call, 0.0, access.rt.runs.agents)
    except CallNotFound as exc:
        raise HTTPException(404, str(exc)) from None
    except CallRefused as exc:
        raise HTTPException(409, str(exc)) from None

    async def stream() -> AsyncIterator[Event]:
        answer = first
        yield Event(_out(answer).model_dump_json(), event=answer.decision)
        while answer.decision == "pending":
            answer = await access.rt.guarded.peek(asker, call, MAX_WAIT_S,
                                                  access.rt.runs.agents)
            if answer.decision != "pending":
                yield Event(_out(answer).model_dump_json(), event=answer.decision)

    return EventStreamResponse(stream(), ping_s=request.app.state.keepalive_s,
                               still_allowed=access.still_allowed,
                               recheck_s=recheck_s(request))


@router.post("/calls/{call}/result", response_model=ObservationOut)
async def report(call: str, body: ResultIn, access: LastingAccessDep,
                 framework: FrameworkHeader = "api") -> ObservationOut:
    """After the tool ran: the PostToolUse hooks (audit, redaction, withholding); the answer
    is the observation the model may see. Reporting again answers the same observation."""
    try:
        answer = await access.rt.guarded.report(
            access.rt.runs.agents, _asker(access, framework), call, output=body.output,
            error=body.error)
    except CallNotFound as exc:
        raise HTTPException(404, str(exc)) from None
    except CallRefused as exc:
        raise HTTPException(409, str(exc)) from None
    return ObservationOut(call=answer.call, text=answer.text, withheld=answer.withheld)
