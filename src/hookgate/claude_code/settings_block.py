"""The ``.claude/settings.json`` hooks block that makes hookgate Claude Code's backend.

Every event hookgate answers gets one ``type: http`` handler posting to
``/api/claude-code/hooks?agent=ID``, with the token taken from an environment variable
(never written into the file), the person a service identity acts for in
``Hookgate-Acts-For`` when one is given, ``CLAUDE_CODE_ENTRYPOINT`` passed along so
hookgate can tell a headless run (where it defers) from an interactive one, and
``onFailure: block`` so an unreachable hookgate blocks the call instead of letting it run.
SessionStart, which Claude Code sends only to command hooks, gets ``hookgate claude-code
forward URL`` instead: the same post, made by a command.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hookgate.claude_code.backend import EVENTS

DEFAULT_TOKEN_ENV = "HOOKGATE_TOKEN"
#: Events Claude Code matches against a tool name; the others take no matcher.
_TOOL_EVENTS = frozenset({"PreToolUse", "PermissionRequest", "PostToolUse",
                          "PostToolUseFailure"})
#: The event Claude Code sends only to ``type: command`` hooks.
COMMAND_ONLY = "SessionStart"
#: Seconds Claude Code gives the hook beyond hookgate's own wait for a person.
_MARGIN_S = 30


def hook_url(server_url: str, agent_id: str) -> str:
    return f"{server_url.rstrip('/')}/api/claude-code/hooks?agent={quote(agent_id, safe='')}"


def acts_for_env(acts_for: str) -> str | None:
    """The environment variable ``acts_for`` names (``$NAME``), or None for a user id."""
    if acts_for.startswith("$") and acts_for[1:].isidentifier():
        return acts_for[1:]
    return None


def settings_block(server_url: str, agent_id: str, *, token_env: str = DEFAULT_TOKEN_ENV,
                   wait_s: float = 20.0, acts_for: str | None = None) -> dict[str, Any]:
    """The ``{"hooks": …}`` object for ``agent_id`` on the server at ``server_url``.
    ``acts_for``: the person a service identity's token acts for, sent as the
    ``Hookgate-Acts-For`` header: a user id, or ``$NAME`` for an environment variable."""
    handler: dict[str, Any] = {
        "type": "http",
        "url": hook_url(server_url, agent_id),
        "headers": {"Authorization": f"Bearer ${token_env}",
                    "X-Claude-Code-Entrypoint": "$CLAUDE_CODE_ENTRYPOINT"},
        "allowedEnvVars": [token_env, "CLAUDE_CODE_ENTRYPOINT"],
        "timeout": int(wait_s) + _MARGIN_S,
        "onFailure": "block",
    }
    forward_args = ["hookgate", "claude-code", "forward",
                    shlex.quote(hook_url(server_url, agent_id)), "--token-env", token_env]
    if acts_for is not None:
        handler["headers"]["Hookgate-Acts-For"] = acts_for
        env = acts_for_env(acts_for)
        if env is not None:
            handler["allowedEnvVars"].append(env)
        forward_args += ["--acts-for", shlex.quote(acts_for)]
    forward = {
        "type": "command",
        "command": " ".join(forward_args),
        "timeout": _MARGIN_S,
    }
    hooks: dict[str, Any] = {}
    for event in EVENTS:
        group: dict[str, Any] = {"hooks": [dict(forward if event == COMMAND_ONLY
                                                else handler)]}
        if event in _TOOL_EVENTS:
            group = {"matcher": "*", **group}
        hooks[event] = [group]
    return {"hooks": hooks}


def merge_into(path: Path, block: dict[str, Any]) -> dict[str, Any]:
    """``path``'s settings with hookgate's handlers replacing any earlier hookgate ones;
    every other setting and hook is kept."""
    settings: dict[str, Any] = {}
    if path.exists():
        loaded = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(loaded, dict):
            raise ValueError(f"{path} does not hold a JSON object")
        settings = loaded
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError(f"{path}: 'hooks' is not an object")
    for event, groups in block["hooks"].items():
        kept = [g for g in hooks.get(event, []) if not _is_ours(g)]
        hooks[event] = kept + groups
    return settings


def _is_ours(group: Any) -> bool:
    handlers = group.get("hooks", []) if isinstance(group, dict) else []
    return any(isinstance(h, dict) and "/api/claude-code/hooks" in str(
        h.get("url") or h.get("command") or "") for h in handlers)
