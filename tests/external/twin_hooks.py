"""The differential test's PreToolUse hook (a python hook, Claude Code's answer format):
vendor ``evil`` is denied; vendor ``cap`` has its amount rewritten down to 1,000."""

from __future__ import annotations

from typing import Any


def twin_guard(event: dict[str, Any]) -> dict[str, Any] | None:
    args = event.get("tool_input") or {}
    vendor = args.get("vendor")
    if vendor == "evil":
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                       "permissionDecision": "deny",
                                       "permissionDecisionReason": "no evil vendors"}}
    amount = args.get("amount")
    if vendor == "cap" and isinstance(amount, int | float) and amount > 1000:
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                       "updatedInput": {**args, "amount": 1000}}}
    return None
