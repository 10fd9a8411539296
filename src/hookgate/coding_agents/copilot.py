"""GitHub Copilot CLI's hooks (``copilot -p`` and the interactive CLI) in hookgate's words and
back.

Copilot sends a camelCase JSON object on stdin with no event name and no tool-call id
(``sessionId``, ``timestamp``, ``cwd``, ``toolName`` — ``bash`` for the shell —, ``toolArgs``,
``toolResult`` after the call; ``source`` at sessionStart; ``prompt`` at
userPromptSubmitted, kept as the session's request; an MCP tool is
``<server>-<tool>``), so the event comes from the
hook's URL (``?event=preToolUse``) and the call id is derived by hookgate
(coding_agents/call_ids.py). Its answers: ``{"permissionDecision": "deny",
"permissionDecisionReason": R}`` denies and the model reads "Denied by preToolUse hook: R"
(after exit 2 it reads only "hook exited with code 2"); a call a person approved in hookgate
is ``"allow"`` (Copilot does not ask again); no decision (``{}``) leaves any other call to
Copilot's own permissions; after a call ``modifiedResult`` replaces what the model reads;
sessionStart's ``additionalContext`` reaches the model; userPromptSubmitted goes on with
``{}`` (Copilot reads no decision from that hook's answer).
"""

from __future__ import annotations

import json
from typing import Any

from hookgate.coding_agents.codec import (
    BadHookInput,
    Event,
    HookInput,
    Outcome,
    Reply,
    prompt_of,
    refusal,
)
from hookgate.coding_agents.tools import SHELL, UnmappableCall, hookgate_call
from hookgate.external.keys import BadId, checked_id

__all__ = ["EVENTS", "CopilotCodec", "deny_body", "mcp_name"]

#: Copilot's event names (in its hooks file and in the hook URL) of the hooks hookgate answers.
EVENTS = {"sessionStart": Event.SESSION_START, "userPromptSubmitted": Event.USER_PROMPT,
          "preToolUse": Event.PRE_TOOL_USE, "postToolUse": Event.POST_TOOL_USE}
_TEXT_LIMIT = 4096


def deny_body(reason: str) -> str:
    """Copilot's deny: the model reads "Denied by preToolUse hook: <reason>"."""
    # Compact: the hook command recognises a deny by its first bytes.
    return json.dumps({"permissionDecision": "deny",
                       "permissionDecisionReason": " ".join(reason.split())},
                      separators=(",", ":"))


class CopilotCodec:
    """Copilot CLI's wire for one event (Copilot's stdin does not name it)."""

    kind = "copilot"

    def __init__(self, event: str) -> None:
        found = EVENTS.get(event)
        if found is None:
            raise BadHookInput(f"event must be one of {', '.join(EVENTS)}, got {event!r}")
        self.name = event
        self.event = found

    def parse(self, body: dict[str, Any]) -> HookInput:
        try:
            session = checked_id("sessionId", body.get("sessionId"), _TEXT_LIMIT)
        except BadId as exc:
            raise BadHookInput(str(exc)) from None
        facts: dict[str, Any] = {"copilot_event": self.name}
        if isinstance(body.get("source"), str):
            facts["copilot_source"] = body["source"]
        cwd = _text(body, "cwd")
        if self.event is Event.SESSION_START:
            return HookInput(self.event, session, cwd=cwd, facts=facts)
        if self.event is Event.USER_PROMPT:
            return HookInput(self.event, session, cwd=cwd, prompt=prompt_of(body),
                             facts=facts)
        tool = _text(body, "toolName")
        args = body.get("toolArgs")
        if tool is None or not isinstance(args, dict):
            raise BadHookInput("toolName must be a string and toolArgs a JSON object")
        if cwd is None:
            # The working folder is part of the call (and of its derived id).
            raise BadHookInput("cwd must be a string")
        facts["copilot_tool_name"] = tool
        try:
            tool, args = hookgate_call(mcp_name(tool), args)
        except UnmappableCall as exc:
            raise BadHookInput(str(exc)) from None
        if tool == SHELL:
            # The model's own words about the command change nothing that runs, and a model
            # repeating the call words them anew: not part of the call (nor of its card).
            args.pop("description", None)
        # No call id: hookgate derives it (coding_agents/call_ids.py).
        return HookInput(self.event, session, cwd=cwd, tool_name=tool, arguments=args,
                         result=body.get("toolResult"), facts=facts)

    def render(self, hook: Event, outcome: Outcome) -> Reply:
        if hook is Event.PRE_TOOL_USE:
            if outcome.refused is not None:
                return Reply(200, deny_body(outcome.refused))
            if outcome.approved is not None:
                # A person (or their standing rule) approved it: Copilot does not ask again.
                return Reply(200, json.dumps({"permissionDecision": "allow",
                                              "permissionDecisionReason": outcome.approved},
                                             separators=(",", ":")))
            # No decision: Copilot's own permissions still apply to the call.
            return Reply(200, "{}")
        if hook is Event.POST_TOOL_USE:
            shown = outcome.refused if outcome.refused is not None else outcome.replaced
            if shown is None:
                return Reply(200, "{}")
            # The model reads this instead of the tool's output.
            return Reply(200, json.dumps({"modifiedResult": {
                "resultType": "success", "textResultForLlm": shown}}))
        if hook is Event.USER_PROMPT:
            # Go on. A refusal's reason (a stopped session) reaches the hook's stderr; its
            # command goes on even then, and the session's tool calls are refused anyway.
            return Reply(200, "{}") if outcome.refused is None else refusal(outcome.refused)
        context = outcome.context
        if outcome.refused is not None:
            # sessionStart cannot stop Copilot; the session's tool calls are refused by
            # hookgate (coding_agents/flow.py) and the model is told why.
            context = f"hookgate refuses every tool call of this session: {outcome.refused}"
        if context:
            return Reply(200, json.dumps({"additionalContext": context}))
        return Reply(200, "{}")


def mcp_name(name: str) -> str:
    """hookgate's ``mcp__<server>__<tool>`` for Copilot's ``<server>-<tool>`` (Copilot's own
    tools have no dash); split at the last dash, since MCP servers are named in kebab-case
    and their tools in snake_case. Any other name is kept."""
    if "-" not in name or name.startswith("mcp__"):
        return name
    server, _, tool = name.rpartition("-")
    return f"mcp__{server}__{tool}" if server and tool else name


def _text(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > _TEXT_LIMIT:
        raise BadHookInput(f"'{key}' must be a string of at most {_TEXT_LIMIT} characters")
    return value
