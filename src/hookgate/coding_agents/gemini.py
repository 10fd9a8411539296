"""Gemini CLI's hooks (``gemini -p`` and interactive) in hookgate's words and back.

Gemini CLI sends SessionStart, BeforeAgent (``prompt``, once per user prompt: kept as the
session's request), BeforeTool and AfterTool to command hooks with a JSON object on stdin
(``session_id``, ``cwd``, ``timestamp``, ``tool_name`` — ``run_shell_command`` for the
shell —, ``tool_input``, ``mcp_context`` for an MCP tool, ``tool_response`` after the
call). Its answers: an allow is ``{}`` or nothing; a deny is exit 2 with the reason on
stderr (or ``{"decision": "deny", "reason": R}``), which the model reads as "Tool execution
blocked: R". After a call, the same deny replaces what the model reads with "Tool result
blocked: R" (a withheld or rewritten result). SessionStart may add context for the model.
At BeforeAgent ``{}`` goes on (the prompt's hook never blocks the prompt:
coding_agents/forwarder.py, ``Refusal.GO_ON``).

Gemini gives a tool call no id: hookgate names each report by its timestamp, tool and
arguments, so an identical call sent again is another call (it joins a request that gave up
waiting as `RetryReuse.IDENTICAL_CALL_AFTER_GIVE_UP` allows, and runs once).
"""

from __future__ import annotations

from typing import Any

from hookgate.coding_agents.codec import (
    BadHookInput,
    Event,
    HookInput,
    Outcome,
    Reply,
    event_and_session,
    optional_text,
    prompt_of,
    render_command_hook,
)
from hookgate.coding_agents.tools import UnmappableCall, hookgate_call, mcp_tool

__all__ = ["EVENTS", "GeminiCodec"]

#: Gemini CLI's event names of the hooks hookgate answers.
EVENTS = {"SessionStart": Event.SESSION_START, "BeforeAgent": Event.USER_PROMPT,
          "BeforeTool": Event.PRE_TOOL_USE, "AfterTool": Event.POST_TOOL_USE}
#: Facts of Gemini's input kept for hooks, audit rows and approval cards.
_FACTS = ("timestamp", "source", "original_request_name")


class GeminiCodec:
    kind = "gemini"

    def parse(self, body: dict[str, Any]) -> HookInput:
        name, event, session = event_and_session(body, EVENTS)
        facts = {f"gemini_{key}": body[key] for key in _FACTS
                 if isinstance(body.get(key), str)}
        facts["gemini_event"] = name
        common: dict[str, Any] = {"session_id": session, "cwd": optional_text(body, "cwd"),
                                  "transcript_path": optional_text(body, "transcript_path")
                                  or None, "facts": facts}
        if event is Event.SESSION_START:
            return HookInput(event, **common)
        if event is Event.USER_PROMPT:
            return HookInput(event, prompt=prompt_of(body), **common)
        tool, args = _tool_call(body)
        # Gemini names no tool call: hookgate derives its id (coding_agents/call_ids.py).
        return HookInput(event, tool_name=tool, arguments=args, call_id=None,
                         result=_result(body.get("tool_response")), **common)

    def render(self, hook: Event, outcome: Outcome) -> Reply:
        # After a call, Gemini's model reads a deny's reason instead of the tool's output.
        return render_command_hook(hook, outcome,
                                   lambda text: {"decision": "deny", "reason": text})


def _tool_call(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The call in hookgate's names: the shell is ``Bash``; an MCP tool (``mcp_context``
    names its server and its own name) is ``mcp__<server>__<tool>``."""
    tool = optional_text(body, "tool_name")
    args = body.get("tool_input")
    if not tool or not isinstance(args, dict):
        raise BadHookInput("tool_name must be a string and tool_input a JSON object")
    mcp = body.get("mcp_context")
    if mcp is not None:
        server = optional_text(mcp, "server_name") if isinstance(mcp, dict) else None
        own = optional_text(mcp, "tool_name") if isinstance(mcp, dict) else None
        if not server or not own:
            raise BadHookInput("mcp_context must name the server_name and tool_name")
        return mcp_tool(server, own), dict(args)
    try:
        return hookgate_call(tool, args)
    except UnmappableCall as exc:
        raise BadHookInput(str(exc)) from None


def _result(response: Any) -> Any:
    """What the model reads of a tool's response (``llmContent``), else the response."""
    if isinstance(response, dict) and "llmContent" in response:
        return response["llmContent"]
    return response
