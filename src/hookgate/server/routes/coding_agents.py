"""``POST /api/codex/hooks?agent=AGENT_ID`` (SPEC §9) and ``POST /api/copilot/hooks?agent=
AGENT_ID&event=EVENT``: the targets of the hook commands ``hookgate codex install`` and
``hookgate copilot install`` write (coding_agents/forwarder.py). The bearer token is the
developer's hookgate token. A 200 answer's body is exactly what Codex reads; anything the
call must not pass — a deny, a pending approval, a body hookgate cannot act on, an error —
is a non-2xx status with a one-line reason, which the forwarder turns into exit 2 (a deny
in Codex). Copilot's deny is a 200 body instead, since its model reads only "hook exited
with code 2" after exit 2. A call waiting for a person lasts only while the developer keeps
access.
"""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from hookgate.coding_agents.codec import BadHookInput, Codec, Outcome, Reply, refusal
from hookgate.coding_agents.codex import CodexCodec
from hookgate.coding_agents.copilot import CopilotCodec
from hookgate.coding_agents.cursor import CursorCodec
from hookgate.coding_agents.flow import Caller, CodingAgentHooks
from hookgate.coding_agents.gemini import GeminiCodec
from hookgate.external.core import ExternalCore
from hookgate.runtime.access_watch import AccessEnded, while_allowed
from hookgate.server.auth import LastingAccessDep, recheck_s
from hookgate.server.responses import ApiResponse

router = APIRouter(tags=["coding-agents"])
log = logging.getLogger(__name__)
_MAX_BODY = 1_000_000


class CodingAgentAnswer(ApiResponse):
    """The agent's own hook output, exactly as it reads it (Codex: ``{}`` allows; at
    SessionStart ``hookSpecificOutput.additionalContext``); see docs/guides/codex.md."""


AgentQuery = Annotated[str, Query(min_length=1, max_length=128,
                                 description="The agent whose hooks and rules apply.")]
_REPLIES: dict[int | str, dict[str, Any]] = {
    200: {"model": CodingAgentAnswer,
          "description": "exactly the body the agent reads (Codex: {} allows)"},
    403: {"description": "refused: a one-line reason the hook prints before exit 2",
          "content": {"text/plain": {"schema": {"type": "string"}}}},
}


def _body(raw: bytes) -> dict[str, Any]:
    def refuse(name: str) -> Any:
        raise BadHookInput(f"the body holds {name}, which is not JSON")

    if len(raw) > _MAX_BODY:
        raise BadHookInput("the body is too large")
    try:
        body = json.loads(raw, parse_constant=refuse)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadHookInput(f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadHookInput("the body is nested too deeply") from None
    if not isinstance(body, dict):
        raise BadHookInput("the body must be a JSON object")
    return body


async def _answer(codec: Codec, request: Request, access: LastingAccessDep,
                  agent_id: str) -> Reply:
    caller, rt = access.caller, access.rt
    agent = rt.runs.agents.get(agent_id)
    if agent is None or agent.org_id != caller.org_id:
        return Reply(404, f"hookgate: no agent '{agent_id}' in org '{caller.org_id}'",
                     "text/plain; charset=utf-8")
    try:
        hook = codec.parse(_body(await request.body()))
    except BadHookInput as exc:
        return refusal(f"hookgate refused the hook input: {exc}")
    hooks = CodingAgentHooks(ExternalCore(rt.approvals, rt.services, rt.runs.ledger),
                             codec.kind)
    try:
        outcome = await while_allowed(hooks.answer(agent, Caller(caller.user_id,
                                                                 caller.org_id), hook),
                                      access.still_allowed, recheck_s(request))
    except AccessEnded as ended:
        outcome = Outcome(refused=f"hookgate: {ended} while this call waited, so it does "
                                  "not run")
    except BadHookInput as exc:
        outcome = Outcome(refused=f"hookgate refused the hook input: {exc}")
    except Exception as exc:
        log.exception("%s hook for agent %s failed", codec.kind, agent_id)
        # The type only: an error's text can carry storage details nobody should see.
        outcome = Outcome(refused=f"hookgate could not decide this call "
                                  f"({type(exc).__name__}), so it does not run")
    return codec.render(hook.event, outcome)


def _hook_route(codec: Codec, path: str, summary: str) -> None:
    """Register ``POST path?agent=ID``: one hook call of ``codec``'s agent, answered with
    exactly the body it reads, or a non-2xx one-line reason its hook turns into exit 2."""

    async def hook(
        request: Request,
        access: LastingAccessDep,
        agent: Annotated[str, Query(min_length=1, max_length=128,
                                    description="The agent whose hooks and rules apply.")],
    ) -> Response:
        reply = await _answer(codec, request, access, agent)
        return Response(reply.body, status_code=reply.status, media_type=reply.media_type)

    router.add_api_route(path, hook, methods=["POST"], responses=_REPLIES,
                         response_class=Response, name=f"{codec.kind}_hook", summary=summary)


_hook_route(CodexCodec(), "/api/codex/hooks",
            "Answer one Codex hook call (SessionStart, PreToolUse, PostToolUse)")
_hook_route(GeminiCodec(), "/api/gemini/hooks",
            "Answer one Gemini CLI hook call (SessionStart, BeforeTool, AfterTool)")
_hook_route(CursorCodec(), "/api/cursor/hooks",
            "Answer one Cursor hook call (sessionStart, preToolUse, postToolUse, "
            "beforeShellExecution, beforeMCPExecution, afterShellExecution)")


@router.post("/api/copilot/hooks", responses=_REPLIES, response_class=Response)
async def copilot_hook(
    request: Request,
    access: LastingAccessDep,
    agent: AgentQuery,
    event: Annotated[str, Query(min_length=1, max_length=64, description=(
        "Copilot's hook event (sessionStart, preToolUse, postToolUse): its stdin does not "
        "name it."))],
) -> Response:
    """Answer one GitHub Copilot CLI hook call for ``agent``: a deny is a 200
    ``{"permissionDecision":"deny","permissionDecisionReason":R}`` (see
    docs/guides/copilot-cli.md)."""
    try:
        codec = CopilotCodec(event)
    except BadHookInput as exc:
        reply = refusal(f"hookgate refused the hook input: {exc}")
    else:
        reply = await _answer(codec, request, access, agent)
    return Response(reply.body, status_code=reply.status, media_type=reply.media_type)
