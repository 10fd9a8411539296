"""``POST /api/claude-code/hooks?agent=AGENT_ID`` (SPEC §7): Claude Code's ``type: http`` hook
target. The bearer token is the developer's hookgate token, or a service identity's whose
``Hookgate-Acts-For`` header names the person its calls act for (their initiator; one it
may not act for is refused with the reason: a denial for PreToolUse and PermissionRequest,
403 for the other events); the answer is Claude Code's
hook JSON. A PreToolUse or PermissionRequest call that hookgate cannot decide is answered
with a denial naming the failure (fail closed), never with an error status Claude Code
would read as "go on". A service identity's token names the developer its calls act for in
the ``Hookgate-Acts-For`` header (approvals/authority.py's `acting_for` checks it on every
hook call): that person is the calls' user and initiator. A call waiting for a person lasts
only while the caller keeps access (runtime/access_watch.py): a revoked token, a disabled user
or one moved to another org ends the wait with a denial, and its request is cancelled.
"""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request

from hookgate.approvals.authority import NotActingFor, acting_for
from hookgate.claude_code.backend import (
    HEADLESS_ENTRYPOINTS,
    BadHookInput,
    HookCaller,
)
from hookgate.runtime.access_watch import AccessEnded, while_allowed
from hookgate.server.auth import LastingAccessDep, recheck_s
from hookgate.server.responses import ClaudeCodeAnswer

router = APIRouter(prefix="/api/claude-code", tags=["claude-code"])
log = logging.getLogger(__name__)
#: The header the installed hooks fill from CLAUDE_CODE_ENTRYPOINT (``sdk-cli`` under -p).
ENTRYPOINT_HEADER = "x-claude-code-entrypoint"
#: The person a service identity's hook calls act for (``hookgate claude-code install
#: --acts-for``); checked by `authority.acting_for` on every hook call.
ACTS_FOR_HEADER = "hookgate-acts-for"
_DECIDING = ("PreToolUse", "PermissionRequest")


def _strict_json(raw: bytes) -> Any:
    def refuse(name: str) -> Any:
        raise BadHookInput(f"the body holds {name}, which is not JSON")

    try:
        return json.loads(raw, parse_constant=refuse)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadHookInput(f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadHookInput("the body is nested too deeply") from None


def _deny(event: object, reason: str) -> dict[str, Any]:
    if event == "PermissionRequest":
        return {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                                       "decision": {"behavior": "deny", "message": reason}}}
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": reason}}


@router.post("/hooks", response_model=ClaudeCodeAnswer)
async def claude_code_hook(
    request: Request,
    access: LastingAccessDep,
    agent: Annotated[str, Query(min_length=1, max_length=128,
                                description="The agent whose hooks and rules apply.")],
) -> dict[str, Any]:
    """Answer one Claude Code hook call (PreToolUse, PermissionRequest, PostToolUse,
    PostToolUseFailure, SessionStart, UserPromptSubmit, Stop) for ``agent``."""
    caller, rt = access.caller, access.rt
    found = rt.runs.agents.get(agent)
    if found is None or found.org_id != caller.org_id:
        raise HTTPException(404, f"no agent '{agent}' in org '{caller.org_id}'")
    try:
        body = _strict_json(await request.body())
        if not isinstance(body, dict):
            raise BadHookInput("the body must be a JSON object")
    except BadHookInput as exc:
        raise HTTPException(400, str(exc)) from None
    entry = request.headers.get(ENTRYPOINT_HEADER, "")
    event = body.get("hook_event_name")
    try:
        initiator = await acting_for(rt.db, caller.user_id, caller.org_id, caller.service,
                                     request.headers.get(ACTS_FOR_HEADER) or None)
    except NotActingFor as exc:
        if event in _DECIDING:
            # Claude Code reads an error status as "go on": a refused call is a denial.
            return _deny(event, f"hookgate refused the call's acts_for: {exc}")
        raise HTTPException(403, str(exc)) from None
    who = HookCaller(caller.user_id, caller.org_id, headless=entry in HEADLESS_ENTRYPOINTS,
                     initiator=initiator)
    try:
        return await while_allowed(rt.claude_code.answer(found, who, body),
                                   access.still_allowed, recheck_s(request))
    except AccessEnded as ended:
        if event in _DECIDING:
            return _deny(event, f"hookgate: {ended} while this call waited, so it does not "
                                "run")
        raise HTTPException(401, str(ended), headers={"WWW-Authenticate": "Bearer"}) from None
    except BadHookInput as exc:
        if event in _DECIDING:
            return _deny(event, f"hookgate refused the hook input: {exc}")
        raise HTTPException(400, str(exc)) from None
    except Exception as exc:
        log.exception("claude-code hook for agent %s failed", agent)
        if event in _DECIDING:
            # The type only: an error's text can carry storage details nobody should see.
            return _deny(event, f"hookgate could not decide this call ({type(exc).__name__}), "
                                "so it does not run")
        raise
