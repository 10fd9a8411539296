"""Approve with edits: the arguments an approver changed, checked like a model's own (the
arguments boundary, then the tool's schema), what changed, and the words the model reads
(always with secret-keyed values masked: `hookgate.hooks.withheld.shown_changes`).

The edited arguments' digest is what an approval then authorises (``approved_binding``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hookgate.approvals.errors import InvalidEdit
from hookgate.approvals.wording import changes_text
from hookgate.canonical import canonical_bytes
from hookgate.hooks.withheld import shown_changes
from hookgate.tools.arguments import ArgumentsRefused, check_arguments
from hookgate.tools.errors import ToolArgumentsError
from hookgate.tools.tool import Tool, args_digest

if TYPE_CHECKING:
    from hookgate.agent import Agent
    from hookgate.approvals.records import ConfirmationRequest



def checked_edit(tool: Tool | None, tool_name: str, original: Mapping[str, Any],
                 edited: Any) -> tuple[dict[str, Any], str] | None:
    """The edited arguments in the tool's canonical form and their digest, or None when
    they are the arguments asked for (no edit). Raises InvalidEdit saying why not."""
    if tool is None:
        # Without the tool's own schema (Claude Code's tools, whose class comes from rules
        # over the asked arguments; tools an engine adds) an edit could not be checked.
        raise InvalidEdit(
            f"the arguments of '{tool_name}' cannot be edited here: hookgate holds no schema "
            "for this tool on this agent, and its classification (writes, needs approval) "
            "was made for the arguments as asked; approve or reject the call as it is")
    if not isinstance(edited, dict):
        raise InvalidEdit(f"edited arguments for '{tool_name}' must be a JSON object, got "
                          f"{type(edited).__name__}")
    try:
        check_arguments(edited)
        valid = tool.validate(edited)
    except (ArgumentsRefused, ToolArgumentsError) as exc:
        raise InvalidEdit(f"edited arguments refused: {exc}") from None
    digest = args_digest(valid)
    if digest == args_digest(original):
        return None
    return valid, digest


def agent_tool(agents: Mapping[str, Agent], request: ConfirmationRequest) -> Tool | None:
    """The declared tool a request is for (by exact name on its agent), or None."""
    agent = agents.get(request.agent_id)
    return agent.toolbox().get(request.tool_name) if agent is not None else None


def changes(before: Mapping[str, Any], after: Mapping[str, Any],
            prefix: str = "") -> list[dict[str, Any]]:
    """Each changed value by path: ``{"path": "amount", "before": 60000, "after": 40000}``
    (a key only on one side has ``None`` on the other and ``"added"``/``"removed"``)."""
    out: list[dict[str, Any]] = []
    for key in [*before, *(k for k in after if k not in before)]:
        path = f"{prefix}.{key}" if prefix else str(key)
        if key not in after:
            out.append({"path": path, "before": before[key], "after": None, "removed": True})
        elif key not in before:
            out.append({"path": path, "before": None, "after": after[key], "added": True})
        elif isinstance(before[key], Mapping) and isinstance(after[key], Mapping):
            out.extend(changes(before[key], after[key], path))
        elif canonical_bytes(before[key]) != canonical_bytes(after[key]):
            out.append({"path": path, "before": before[key], "after": after[key]})
    return out


def model_note(request_id: str, decided_by: str | None, found: list[dict[str, Any]],
               message: str | None) -> str:
    """What the model reads next to the tool's result of an edited (or commented) call: the
    changes as the model may see them (a value under a secret-looking key is masked; the
    model is told it changed, never what it is)."""
    who = decided_by or "the approver"
    lines = []
    if found:
        lines.append(f"Note: {who} changed the arguments before approving (request "
                     f"{request_id}), and the call ran with the changed ones: "
                     f"{changes_text(shown_changes(found))}.")
    if message:
        lines.append(f"Message from {who}: {message}")
    return "\n".join(lines)


def edit_summary(asked: Mapping[str, Any], final: Mapping[str, Any]) -> str | None:
    """What changed from ``asked`` to ``final`` as the model may read it (``amount: 60000 →
    40000; api_token: "••••" → "••••"``), or None when nothing did: for the guarded-call
    API's note, the same words and masking as `model_note`."""
    found = changes(asked, final)
    return changes_text(shown_changes(found)) if found else None
