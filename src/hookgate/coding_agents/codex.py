"""Codex's hooks (``codex exec`` and the TUI) in hookgate's words and back.

Codex sends SessionStart, UserPromptSubmit (``prompt``: kept as the session's request),
PreToolUse and PostToolUse to command hooks with a JSON object on stdin (``session_id``,
``cwd``, ``tool_name`` — ``Bash`` for the shell, ``mcp__<server>__<tool>``
—, ``tool_input``, ``tool_use_id``, ``tool_response``). Its answers: an allow is exactly
``{}`` (``"permissionDecision": "allow"`` counts as a failed hook and the tool RUNS), a
deny is exit 2 with the reason on stderr, which the model reads as "Command blocked by
PreToolUse hook: <reason>". After a call, exit 2 or ``{"decision": "block", "reason": R}``
replaces the output the model reads with R (a withheld or rewritten result). SessionStart
may add context for the model. At UserPromptSubmit ``{}`` goes on (the prompt's hook never
blocks the prompt: coding_agents/forwarder.py, ``Refusal.GO_ON``).
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
from hookgate.coding_agents.tools import UnmappableCall, hookgate_call

__all__ = ["EVENTS", "CodexCodec"]

#: Codex's event names of the hooks hookgate answers.
EVENTS = {"SessionStart": Event.SESSION_START, "UserPromptSubmit": Event.USER_PROMPT,
          "PreToolUse": Event.PRE_TOOL_USE, "PostToolUse": Event.POST_TOOL_USE}
#: Facts of Codex's input kept for hooks, audit rows and approval cards.
_FACTS = ("turn_id", "model", "permission_mode", "source")


class CodexCodec:
    kind = "codex"

    def parse(self, body: dict[str, Any]) -> HookInput:
        name, event, session = event_and_session(body, EVENTS)
        facts = {f"codex_{key}": body[key] for key in _FACTS
                 if isinstance(body.get(key), str)}
        facts["codex_event"] = name
        common: dict[str, Any] = {"session_id": session, "cwd": optional_text(body, "cwd"),
                                  "transcript_path": optional_text(body, "transcript_path"),
                                  "facts": facts}
        if event is Event.SESSION_START:
            return HookInput(event, **common)
        if event is Event.USER_PROMPT:
            return HookInput(event, prompt=prompt_of(body), **common)
        tool = optional_text(body, "tool_name")
        args = body.get("tool_input")
        if tool is None or not isinstance(args, dict):
            raise BadHookInput("tool_name must be a string and tool_input a JSON object")
        try:
            tool, args = hookgate_call(tool, args)
        except UnmappableCall as exc:
            raise BadHookInput(str(exc)) from None
        call_id = body.get("tool_use_id")
        if not isinstance(call_id, str) or not call_id:
            raise BadHookInput("tool_use_id must be a non-empty string")
        return HookInput(event, tool_name=tool, arguments=args, call_id=call_id,
                         result=body.get("tool_response"), **common)

    def render(self, hook: Event, outcome: Outcome) -> Reply:
        # Codex's model reads a block's reason instead of the tool's output; an allow is
        # exactly {} (anything else at PreToolUse is a failed hook: it runs).
        return render_command_hook(hook, outcome,
                                   lambda text: {"decision": "block", "reason": text})

