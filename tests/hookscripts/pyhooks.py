"""Python hooks for the declarative-hook tests: each takes the hook input dict and returns
Claude Code's answer as a dict (or None to allow)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

CARD = re.compile(r"\b(?:\d{4} ){3}\d{4}\b")
SEEN: list[dict[str, Any]] = []


def scrub_card_numbers(event: dict[str, Any]) -> dict[str, Any] | None:
    """PostToolUse, sync: masks card numbers in the tool's output."""
    SEEN.append(event)
    response = event["tool_response"]
    text = response if isinstance(response, str) else str(response)
    if not CARD.search(text):
        return None
    masked = CARD.sub("**** **** **** ****", text)
    return {"hookSpecificOutput": {"hookEventName": "PostToolUse",
                                   "updatedToolOutput": masked}}


async def refuse_refunds_on_weekends(event: dict[str, Any]) -> dict[str, Any]:
    """PreToolUse, async: denies (the test's calendar says it is always the weekend)."""
    await asyncio.sleep(0)
    SEEN.append(event)
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                   "permissionDecision": "deny",
                                   "permissionDecisionReason": "no refunds at weekends"}}


def answers_a_list(event: dict[str, Any]) -> list[str]:
    """Breaks the contract: an answer must be a dict or None."""
    return ["allow"]


def raises(event: dict[str, Any]) -> None:
    raise RuntimeError("the policy service is down")


class NotAFunction:
    pass


def stop_the_run(event: dict[str, Any]) -> dict[str, Any]:
    """PostToolUse: Claude Code's ``continue: false`` — the whole run stops here."""
    return {"continue": False, "stopReason": "a hook stopped the run after the note"}
