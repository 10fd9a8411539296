"""What an approver reads next to the exact arguments: the user's message, the tool's
description, why the call needs a person, and the arguments' large numbers written for
people (``60,000``). Captured once, when the request is created, and stored with it."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from hookgate.approvals.service import ApprovalAsk
from hookgate.hooks.withheld import shown_args
from hookgate.tools.tool import Tool

#: Numbers from this size on get a grouped rendering next to the exact value.
GROUPED_FROM = 1000
#: Long user messages are kept whole in the database; cards cut them.
MESSAGE_CHARS = 4000
#: The coding agents by the name people know them, from the ``coding_agent`` fact every
#: coding agent's hook calls carry (hookgate.coding_agents, hookgate.claude_code).
CODING_AGENTS = {"claude-code": "Claude Code", "codex": "Codex", "cursor": "Cursor",
                 "gemini": "Gemini CLI", "copilot": "GitHub Copilot CLI"}
#: The longest working folder kept on a request.
FOLDER_CHARS = 1000


def approval_context(ask: ApprovalAsk) -> dict[str, Any]:
    """The stored context of a new request: ``user_message``, ``tool_description`` and
    ``reasons`` (each ``{"kind", "text"}``, plus ``hook`` for an ``ask`` hook; ``gate_rule``
    names the configured rules that matched a call to a tool the agent does not declare);
    ``coding_agent`` for a coding agent's call (`coding_agent`)."""
    agent = ask.agent
    tool = next((t for t in agent.tools if t.name == ask.tool_name), None)
    message = ask.metadata.get("user_message")
    # A tool the agent does not declare (an MCP server's, Claude Code's, a framework
    # adapter's) is described by what the guarded path saw of it: the description its client
    # or server gave.
    described = tool.description if tool is not None else ask.metadata.get("tool_description")
    context: dict[str, Any] = {
        "user_message": message[:MESSAGE_CHARS] if isinstance(message, str) else None,
        "tool_description": described if isinstance(described, str) and described else None,
        "reasons": _reasons(ask, tool),
    }
    coding = coding_agent(ask.metadata)
    if coding is not None:
        context["coding_agent"] = coding
    # A tool of an agent that runs elsewhere (hookgate.external): the schema and description
    # its runtime declared, so a person sees them and an edit is checked against them.
    declared = ask.metadata.get("tool_schema")
    if tool is None and isinstance(declared, dict):
        context["tool_schema"] = declared
        described = ask.metadata.get("tool_description")
        if isinstance(described, str):
            context["tool_description"] = described[:MESSAGE_CHARS]
    return context


def coding_agent(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """``{"kind", "name", "cwd"}`` of a call a coding agent asked about through its hooks —
    which agent, in which working folder — or None for any other call."""
    kind = metadata.get("coding_agent")
    if not isinstance(kind, str) or not kind:
        return None
    cwd = metadata.get("cwd")
    return {"kind": kind, "name": CODING_AGENTS.get(kind, kind),
            "cwd": cwd[:FOLDER_CHARS] if isinstance(cwd, str) and cwd else None}


def _reasons(ask: ApprovalAsk, tool: Tool | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if ask.agent.require_confirmation_for_all:
        out.append({"kind": "require_confirmation_for_all",
                    "text": f"agent '{ask.agent.id}' has require_confirmation_for_all: "
                            "every tool call needs a person's approval"})
    if tool is not None and tool.needs_confirmation(ask.args):
        rule = tool.requires_confirmation
        if tool.confirmation_reason:
            text = f"the tool's rule: {tool.confirmation_reason}"
        elif callable(rule):
            name = getattr(rule, "__name__", "")
            named = f" '{name}'" if name and name != "<lambda>" else ""
            text = f"the tool's requires_confirmation predicate{named} matched these arguments"
        else:
            text = "the tool is marked requires_confirmation: every call needs a person"
        out.append({"kind": "tool_rule", "text": text})
    gate_rule = ask.metadata.get("confirmation_reason")
    if tool is None and gate_rule and ask.metadata.get("requires_confirmation"):
        # The configured gate rules that matched (mcp_servers:, claude_code.rules), by name.
        out.append({"kind": "gate_rule", "text": f"gate rule {gate_rule}"})
    for asked in ask.asked_by:
        hook, reason = asked.hook, asked.reason
        out.append({"kind": "hook_ask", "hook": hook, "reason": reason,
                    "text": f"hook '{hook}' answered ask" + (f": {reason}" if reason else "")})
    if not out:
        # A Python hook set the flag itself; it gave no words, but say who could have.
        out.append({"kind": "hook_flag",
                    "text": "a hook flagged this call as needing a person's approval"})
    return out


def readable_numbers(args: Mapping[str, Any]) -> list[dict[str, str]]:
    """``[{"path": "amount", "text": "60,000"}]`` for every number of ``args`` (at any depth)
    that reads better grouped; the exact arguments are shown unchanged beside them. A number
    under a secret-looking key is not one: where the arguments are shown masked (a card),
    its grouped copy would show it beside the mask."""
    return [{"path": path, "text": text} for path, text in _numbers(shown_args(args), "")]


def _numbers(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _numbers(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _numbers(item, f"{path}[{i}]")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            return
        if abs(value) >= GROUPED_FROM:
            yield path, group(value)


def group(value: int | float) -> str:
    """``60000`` → ``60,000``; ``1234.5`` → ``1,234.5`` (no rounding of the digits)."""
    if isinstance(value, int):
        return f"{value:,}"
    # From the float's shortest repr, so no digit appears that the value does not have.
    text = repr(value)
    if "e" in text:
        return text
    whole, _, frac = text.partition(".")
    return f"{int(whole):,}" if frac in ("", "0") else f"{int(whole):,}.{frac}"
