"""GitHub Copilot CLI's own hook file for hookgate: ``.github/hooks/hookgate.json`` in the
repository (Copilot reads every ``.github/hooks/*.json`` of the git root; other files are
never touched), ``{"version": 1, "hooks": {<event>: [<command hook>, …]}}`` with one forwarder
command per event, each posting to ``/api/copilot/hooks?agent=…&event=…`` (Copilot's stdin
does not name the event). Hooks of others in that file are kept.

In ``copilot -p`` Copilot skips repository hooks silently unless
``GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS=true`` (or ``COPILOT_ALLOW_ALL=true``) is set, or
the folder is trusted: `prompt_mode_loads` says whether an environment loads them. The
user-level file, ``$COPILOT_HOME/hooks/hookgate.json`` (`user_file`; ``~/.copilot`` by
default), has the same shape and loads in every folder, ``-p`` included, with no opt-in
(checked with ``copilot -p`` 1.0.102, which also reads a ``hooks`` object of
``$COPILOT_HOME/settings.json``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hookgate.coding_agents.forwarder import (
    PROMPT_TIMEOUT_S,
    Accept,
    Refusal,
    command,
    hook_timeout_s,
    prompt_command,
)

__all__ = ["FILE", "PROMPT_MODE_ENV", "ROUTE", "hook_url", "hooks_file", "is_ours",
           "merge_into", "prompt_mode_loads", "remove_from", "user_file"]

ROUTE = "/api/copilot/hooks"
#: The file hookgate owns, relative to the repository's root.
FILE = Path(".github") / "hooks" / "hookgate.json"
#: The environment variable that makes ``copilot -p`` load repository hooks.
PROMPT_MODE_ENV = "GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS"
_EVENTS = {"sessionStart": Accept.OBJECT, "userPromptSubmitted": Accept.OBJECT,
           "preToolUse": Accept.PERMISSION_DECISION, "postToolUse": Accept.OBJECT}
_PROMPT = "userPromptSubmitted"


def user_file(env: Mapping[str, str], home: Path) -> Path:
    """hookgate's user-level hooks file: ``$COPILOT_HOME/hooks/hookgate.json``, where
    ``COPILOT_HOME`` defaults to ``~/.copilot``."""
    copilot_home = Path(env["COPILOT_HOME"]) if env.get("COPILOT_HOME") else home / ".copilot"
    return copilot_home / "hooks" / FILE.name


def hook_url(server_url: str, agent_id: str, event: str) -> str:
    return (f"{server_url.rstrip('/')}{ROUTE}?agent={quote(agent_id, safe='')}"
            f"&event={event}")


def hooks_file(server_url: str, agent_id: str, *, token_env: str,
               wait_s: float) -> dict[str, Any]:
    """hookgate's ``{"version": 1, "hooks": …}`` for ``agent_id``: one command per event."""
    hooks: dict[str, Any] = {}
    for event, accept in _EVENTS.items():
        url = hook_url(server_url, agent_id, event)
        hook = {"type": "command", "timeoutSec": hook_timeout_s(wait_s),
                "bash": command(url, token_env=token_env, wait_s=wait_s, accept=accept,
                                refusal=Refusal.DENY_BODY)}
        if event == _PROMPT:
            # The prompt's hook never blocks the prompt (forwarder.Refusal.GO_ON).
            hook = {"type": "command", "timeoutSec": PROMPT_TIMEOUT_S,
                    "bash": prompt_command(url, token_env=token_env, accept=accept)}
        hooks[event] = [hook]
    return {"version": 1, "hooks": hooks}


def is_ours(hook: Any) -> bool:
    return isinstance(hook, dict) and ROUTE in str(hook.get("bash") or "")


def remove_from(path: Path) -> dict[str, Any]:
    """``path``'s hook file without hookgate's hooks (events left empty dropped)."""
    config: dict[str, Any] = {}
    if path.exists():
        loaded = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(loaded, dict) or not isinstance(loaded.get("hooks", {}), dict):
            raise ValueError(f"{path} does not hold a JSON object with a 'hooks' object")
        config = loaded
    hooks = config.get("hooks", {})
    for event, entries in list(hooks.items()):
        if isinstance(entries, list):
            hooks[event] = [h for h in entries if not is_ours(h)]
            if not hooks[event]:
                del hooks[event]
    return config


def merge_into(path: Path, block: dict[str, Any]) -> dict[str, Any]:
    """``path``'s hook file with hookgate's hooks replacing earlier hookgate ones."""
    config = remove_from(path)
    config["version"] = block["version"]
    hooks = config.setdefault("hooks", {})
    for event, entries in block["hooks"].items():
        hooks[event] = [*hooks.get(event, []), *entries]
    return config


def prompt_mode_loads(env: Mapping[str, str]) -> bool:
    """Whether ``copilot -p`` run with ``env`` loads repository hooks (an untrusted folder)."""
    return env.get(PROMPT_MODE_ENV) == "true" or env.get("COPILOT_ALLOW_ALL") == "true"
