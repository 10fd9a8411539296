"""Gemini CLI's own hook configuration for hookgate: the ``hooks`` block of a
``settings.json`` (project ``.gemini/settings.json`` or the user's ``~/.gemini/settings.json``),
one forwarder command per event with Gemini's timeouts in milliseconds, merged into what is
there; and what in the settings would keep those hooks from running.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hookgate.coding_agents import codex_config
from hookgate.coding_agents.forwarder import (
    PROMPT_TIMEOUT_S,
    Accept,
    command,
    hook_timeout_s,
    prompt_command,
)

__all__ = ["HOOK_NAME", "ROUTE", "hook_url", "hooks_block", "merge_into", "remove_from",
           "why_not_run"]

ROUTE = "/api/gemini/hooks"
#: The ``name`` of hookgate's hooks (what Gemini's ``hooksConfig.disabled`` would list).
HOOK_NAME = "hookgate"
_EVENTS = {"SessionStart": Accept.OBJECT, "BeforeAgent": Accept.EMPTY,
           "BeforeTool": Accept.EMPTY, "AfterTool": Accept.OBJECT}
#: Gemini matches tool events' ``matcher`` as a regular expression over the tool's name.
_TOOL_EVENTS = frozenset({"BeforeTool", "AfterTool"})
#: The prompt's hook never blocks the prompt (forwarder.Refusal.GO_ON).
_PROMPT = "BeforeAgent"


def hook_url(server_url: str, agent_id: str) -> str:
    return codex_config.hook_url(server_url, agent_id, route=ROUTE)


def hooks_block(server_url: str, agent_id: str, *, token_env: str,
                wait_s: float) -> dict[str, Any]:
    """``{"hooks": …}`` for ``agent_id``: one command handler per event."""
    url = hook_url(server_url, agent_id)
    hooks: dict[str, Any] = {}
    for event, accept in _EVENTS.items():
        handler = {"type": "command", "name": HOOK_NAME,
                   "timeout": hook_timeout_s(wait_s) * 1000,
                   "command": command(url, token_env=token_env, wait_s=wait_s,
                                      accept=accept)}
        if event == _PROMPT:
            handler = {"type": "command", "name": HOOK_NAME, "timeout": PROMPT_TIMEOUT_S * 1000,
                       "command": prompt_command(url, token_env=token_env, accept=accept)}
        group: dict[str, Any] = {"hooks": [handler]}
        if event in _TOOL_EVENTS:
            group = {"matcher": ".*", **group}
        hooks[event] = [group]
    return {"hooks": hooks}


def merge_into(path: Path, block: dict[str, Any]) -> dict[str, Any]:
    """``path``'s settings with hookgate's hook groups replacing earlier hookgate ones."""
    return codex_config.merge_into(path, block, ours=_ours)


def remove_from(path: Path) -> dict[str, Any]:
    """``path``'s settings without hookgate's hook groups."""
    return codex_config.remove_from(path, ours=_ours)


def ours(settings: dict[str, Any]) -> dict[str, str]:
    """hookgate's hook command per event in ``settings``."""
    found: dict[str, str] = {}
    hooks = settings.get("hooks")
    for event, groups in (hooks.items() if isinstance(hooks, dict) else []):
        for group in groups if isinstance(groups, list) else []:
            if codex_config.is_ours(group, route=ROUTE):
                handler = next(h for h in group["hooks"] if ROUTE in str(h.get("command")))
                found[event] = str(handler["command"])
    return found


def why_not_run(files: list[Path]) -> str | None:
    """What in these settings files (user, then project) keeps Gemini from running
    hookgate's hooks — hooks switched off, or hookgate's disabled by name — else None."""
    for path in files:
        if not path.exists():
            continue
        settings = json.loads(path.read_text(encoding="utf-8"))
        config = settings.get("hooksConfig") if isinstance(settings, dict) else None
        if not isinstance(config, dict):
            continue
        if config.get("enabled") is False:
            return f"{path} turns hooks off (hooksConfig.enabled is false)"
        disabled = config.get("disabled")
        if isinstance(disabled, list) and HOOK_NAME in disabled:
            return f"{path} disables the hooks named '{HOOK_NAME}' (hooksConfig.disabled)"
    return None


def _ours(group: Any) -> bool:
    return codex_config.is_ours(group, route=ROUTE)
