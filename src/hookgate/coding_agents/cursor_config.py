"""Cursor's own hook configuration for hookgate: the ``hooks.json`` entries (one forwarder
command per event, each ``"failClosed": true`` — Cursor runs the tool when a hook crashes,
times out or answers nothing unless told otherwise), merged into what is there.

Cursor fires both its generic tool hooks (preToolUse, postToolUse: every tool, with the call's
id) and its granular ones (beforeShellExecution, beforeMCPExecution, afterShellExecution) for
one call, so hookgate takes one layer: asking twice about one call would take an approval
twice. The generic layer is the default; the granular one is for builds without it.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hookgate.coding_agents import codex_config
from hookgate.coding_agents.forwarder import (
    PROMPT_TIMEOUT_S,
    Accept,
    Refusal,
    command,
    hook_timeout_s,
    prompt_command,
)

__all__ = ["ROUTE", "Layer", "hook_url", "hooks_block", "is_ours", "merge_into", "ours_in",
           "remove_from"]

ROUTE = "/api/cursor/hooks"


class Layer(enum.Enum):
    """Which of Cursor's tool hooks hookgate answers."""

    #: preToolUse and postToolUse: every tool (Shell, Read, Write, MCP:…), with its call id.
    TOOL = "tool"
    #: beforeShellExecution, beforeMCPExecution, afterShellExecution: shell and MCP only.
    SHELL_MCP = "shell-mcp"


_EVENTS = {
    Layer.TOOL: {"sessionStart": Accept.JSON, "preToolUse": Accept.PERMISSION,
                 "postToolUse": Accept.JSON},
    Layer.SHELL_MCP: {"sessionStart": Accept.JSON, "beforeShellExecution": Accept.PERMISSION,
                      "beforeMCPExecution": Accept.PERMISSION,
                      "afterShellExecution": Accept.JSON},
}


#: Cursor's prompt event (both layers) and its answer to go on.
_PROMPT = "beforeSubmitPrompt"
GO_ON = '{"continue":true}'


def hook_url(server_url: str, agent_id: str) -> str:
    return f"{server_url.rstrip('/')}{ROUTE}?agent={quote(agent_id, safe='')}"


def hooks_block(server_url: str, agent_id: str, *, token_env: str, wait_s: float,
                layer: Layer = Layer.TOOL) -> dict[str, Any]:
    """``{"version": 1, "hooks": …}`` for ``agent_id``: one fail-closed command per event."""
    url = hook_url(server_url, agent_id)
    hooks = {event: [{"command": command(url, token_env=token_env, wait_s=wait_s,
                                         accept=accept, refusal=Refusal.STDOUT),
                      "timeout": hook_timeout_s(wait_s), "failClosed": True}]
             for event, accept in _EVENTS[layer].items()}
    # The prompt's hook never blocks the prompt (forwarder.Refusal.GO_ON): after a failure it
    # says go on itself, so an entry that fails closed still does.
    hooks[_PROMPT] = [{"command": prompt_command(url, token_env=token_env, accept=Accept.JSON,
                                                 go_on=GO_ON),
                       "timeout": PROMPT_TIMEOUT_S, "failClosed": True}]
    return {"version": 1, "hooks": hooks}


def is_ours(entry: Any) -> bool:
    return isinstance(entry, dict) and ROUTE in str(entry.get("command") or "")


def merge_into(path: Path, block: dict[str, Any]) -> dict[str, Any]:
    """``path``'s hooks with hookgate's entries replacing earlier hookgate ones (of either
    layer); everything else is kept."""
    merged = codex_config.merge_into(path, block, ours=is_ours)
    return {"version": merged.pop("version", block["version"]), **merged}


def remove_from(path: Path) -> dict[str, Any]:
    """``path``'s configuration without hookgate's entries (empty events dropped)."""
    return codex_config.remove_from(path, ours=is_ours)


def ours_in(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """hookgate's entry per event in a loaded ``hooks.json``."""
    hooks = config.get("hooks")
    found: dict[str, dict[str, Any]] = {}
    for event, entries in (hooks.items() if isinstance(hooks, dict) else ()):
        for entry in entries if isinstance(entries, list) else ():
            if is_ours(entry):
                found[event] = entry
    return found
