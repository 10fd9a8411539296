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
from hookgate.tools.guarded_call import converted_arguments
from hookgate.tools.tool import Tool, args_digest

if TYPE_CHECKING:
    from hookgate.agent import Agent
    from hookgate.approvals.records import ConfirmationRequest



def checked_edit(tool: Tool | None, tool_name: str, original: Mapping[str, Any],
                 edited: Any) -> tuple[dict[str, Any], str] | None:
    """The edited arguments validated and converted by the tool's declared parameter types
    (the tool's own validation, the one the engines run on a model's arguments: ``"60000"``
    for a number becomes 60000.0), and their digest; None when they are the arguments
    asked for (no edit). Raises InvalidEdit (HTTP 422) saying what is wrong."""
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
        valid = converted_arguments(tool, edited)
    except (ArgumentsRefused, ToolArgumentsError) as exc:
        raise InvalidEdit(f"edited arguments refused: {exc}") from None
    wrong = _not_declared_type(tool.parameters, valid)
    if wrong is not None:
        # The tool's validation left a value of another type than it declares (a schema
        # it does not convert by): what would run is not what the tool takes.
        raise InvalidEdit(f"edited arguments refused: {wrong}")
    digest = args_digest(valid)
    if digest == args_digest(original):
        return None
    return valid, digest


#: The Python values each JSON schema type admits (a bool is no number here).
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "number": (int, float), "integer": (int,), "boolean": (bool,),
    "object": (dict,), "array": (list,), "null": (type(None),)}


def _not_declared_type(schema: Mapping[str, Any], args: Mapping[str, Any]) -> str | None:
    """What in ``args`` is not of the type the schema declares for it (top-level
    parameters with a plain ``type``), or None."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return None
    for name, value in args.items():
        prop = props.get(name)
        declared = prop.get("type") if isinstance(prop, Mapping) else None
        names = [declared] if isinstance(declared, str) else declared
        if not isinstance(names, list) or not names:
            continue
        admitted = [t for n in names if isinstance(n, str) for t in _JSON_TYPES.get(n, ())]
        if len(admitted) < len(names):
            continue  # a type this check does not know: the tool's validation decided
        is_bool = isinstance(value, bool)
        if not any(isinstance(value, t) and (t is bool or not is_bool) for t in admitted):
            return (f"'{name}' must be {' or '.join(map(str, names))} (the tool declares it "
                    f"so), not {value!r}"[:300])
    return None


def agent_tool(agents: Mapping[str, Agent], request: ConfirmationRequest) -> Tool | None:
    """The declared tool a request is for: by exact name on its agent, and only while the
    agent is in the request's org (an agent id configured elsewhere since is not its
    agent); None otherwise."""
    agent = agents.get(request.agent_id)
    if agent is None or (agent.org_id is not None and request.org_id is not None
                         and agent.org_id != request.org_id):
        return None
    return agent.toolbox().get(request.tool_name)


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
