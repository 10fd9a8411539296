"""Cursor's hooks (the agent in the editor and ``cursor-agent``) in hookgate's words and back,
from Cursor's documented protocol (cursor.com/docs/agent/hooks; there is no CLI to test here).

Cursor runs command hooks with a flat snake_case JSON object on stdin: ``hook_event_name``
(camelCase), ``conversation_id``, ``generation_id``, ``workspace_roots``, and per event
``tool_name``/``tool_input``/``tool_use_id`` (preToolUse, postToolUse with ``tool_output``),
``command``/``cwd`` (beforeShellExecution, afterShellExecution with ``output``) or
``tool_name``/``tool_input`` as a JSON string (beforeMCPExecution), ``prompt``
(beforeSubmitPrompt: kept as the session's request). Its answers are flat too:
before a tool ``{"permission": "allow"|"deny", "user_message", "agent_message"}`` — with
``failClosed`` an empty answer is a failed hook, so an allow is said out loud; after one, or
at sessionStart, ``{"additional_context": …}``; before a prompt ``{"continue": true}`` (the
prompt's hook never blocks it: coding_agents/forwarder.py, ``Refusal.GO_ON``). ``ask`` is
not used: Cursor does not enforce it on preToolUse and treats it as a deny elsewhere, and no
Cursor hook can wait for a person past its timeout, so a pending call is a deny that names
the request to repeat the call after.
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
    hook_event,
    optional_text,
    prompt_of,
    refusal,
    session_of,
)
from hookgate.coding_agents.tools import UnmappableCall, hookgate_call

__all__ = ["EVENTS", "CursorCodec", "tool_name"]

#: Cursor's event names of the hooks hookgate answers.
EVENTS = {"sessionStart": Event.SESSION_START, "beforeSubmitPrompt": Event.USER_PROMPT,
          "preToolUse": Event.PRE_TOOL_USE,
          "beforeShellExecution": Event.PRE_TOOL_USE,
          "beforeMCPExecution": Event.PRE_TOOL_USE, "postToolUse": Event.POST_TOOL_USE,
          "afterShellExecution": Event.POST_TOOL_USE}
#: Facts of Cursor's input kept for hooks, audit rows and approval cards.
_FACTS = ("generation_id", "model", "cursor_version", "composer_mode")
#: Cursor's name of its shell tool at preToolUse (its hooks' matchers say ``Shell``).
_SHELL = "Shell"


def tool_name(name: str) -> str:
    """hookgate's name of a Cursor tool: ``MCP:<server>:<tool>`` is ``mcp__<server>__<tool>``
    (the name rules on MCP tools use); every other name is kept."""
    if name.startswith("MCP:"):
        server, _, tool = name[len("MCP:"):].partition(":")
        if server and tool:
            return f"mcp__{server}__{tool}"
    return name


class CursorCodec:
    kind = "cursor"

    def parse(self, body: dict[str, Any]) -> HookInput:
        name, event = hook_event(body, EVENTS)
        session = session_of("conversation_id",
                             body.get("conversation_id") or body.get("session_id"))
        facts: dict[str, Any] = {f"cursor_{key}": body[key] for key in _FACTS
                                 if isinstance(body.get(key), str) and body[key]}
        facts["cursor_event"] = name
        common: dict[str, Any] = {"session_id": session,
                                  "transcript_path": optional_text(body, "transcript_path"),
                                  "facts": facts}
        if event is Event.SESSION_START:
            return HookInput(event, cwd=_folder(body, None), **common)
        if event is Event.USER_PROMPT:
            return HookInput(event, cwd=_folder(body, None), prompt=prompt_of(body), **common)
        tool, args, call_id, result = _call(name, body)
        try:
            tool, args = hookgate_call(tool, args)
        except UnmappableCall as exc:
            raise BadHookInput(str(exc)) from None
        return HookInput(event, cwd=_folder(body, args), tool_name=tool, arguments=args,
                         call_id=call_id, result=result, **common)

    def render(self, hook: Event, outcome: Outcome) -> Reply:
        if hook is Event.PRE_TOOL_USE:
            if outcome.refused is not None:
                # The model reads user_message (as the failed call's error); agent_message
                # is documented as the agent's: both carry the reason.
                return _json({"permission": "deny", "user_message": outcome.refused,
                              "agent_message": outcome.refused})
            return _json({"permission": "allow"})
        if hook is Event.USER_PROMPT:
            # A refusal's reason reaches the hook's stderr; its command goes on even then.
            if outcome.refused is not None:
                return refusal(outcome.refused)
            return _json({"continue": True})
        # After a call or at sessionStart Cursor only adds context (it replaces the output
        # of an MCP tool alone): a withheld or rewritten output is named to the model.
        note = outcome.refused or outcome.replaced or outcome.context
        return _json({"additional_context": note} if note else {})


def _call(name: str, body: dict[str, Any]) -> tuple[str, dict[str, Any], str | None, Any]:
    """The tool, its arguments, the call's id and (after it) its result, per event."""
    if name in ("preToolUse", "postToolUse"):
        tool = optional_text(body, "tool_name")
        args = body.get("tool_input")
        if tool is None or not isinstance(args, dict):
            raise BadHookInput("tool_name must be a string and tool_input a JSON object")
        call_id = body.get("tool_use_id")
        if not isinstance(call_id, str) or not call_id:
            raise BadHookInput("tool_use_id must be a non-empty string")
        return tool_name(tool), args, call_id, _output(body.get("tool_output"))
    # The granular hooks carry no id of the call: hookgate derives it
    # (coding_agents/call_ids.py), as for every agent whose hooks name no call.
    call_id = None
    if name == "beforeMCPExecution":
        tool = optional_text(body, "tool_name")
        raw = body.get("tool_input")
        try:
            args = _json_value(raw) if isinstance(raw, str) else raw
        except ValueError:
            args = None
        if tool is None or not isinstance(args, dict):
            raise BadHookInput("tool_name must be a string and tool_input a JSON object "
                               "(or one as a string)")
        return tool_name(f"MCP:{tool}"), args, call_id, None
    command = optional_text(body, "command")
    if command is None:
        raise BadHookInput("command must be a string")
    return _SHELL, {"command": command}, call_id, body.get("output")


def _output(raw: Any) -> Any:
    """postToolUse's ``tool_output`` is a JSON string: its value, else the text itself."""
    if not isinstance(raw, str):
        return raw
    try:
        return _json_value(raw)
    except ValueError:
        return raw


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_value(text: str) -> Any:
    """``text`` parsed as JSON, refusing NaN and ±Infinity (ValueError), as the route does."""
    return json.loads(text, parse_constant=_not_json)


def _folder(body: dict[str, Any], args: dict[str, Any] | None) -> str | None:
    """The working folder: the input's ``cwd``, the shell call's, else the first workspace
    root (Cursor often sends an empty ``cwd``)."""
    for value in (body.get("cwd"), (args or {}).get("cwd")):
        if isinstance(value, str) and value:
            return optional_text({"cwd": value}, "cwd")
    roots = body.get("workspace_roots")
    if isinstance(roots, list) and roots and isinstance(roots[0], str) and roots[0]:
        return optional_text({"cwd": roots[0]}, "cwd")
    return None


def _json(body: dict[str, Any]) -> Reply:
    # Compact, so the forwarder recognises an allow or a deny by its first bytes.
    return Reply(200, json.dumps(body, separators=(",", ":")))

