"""Codex's own hook configuration for hookgate: the ``hooks.json`` block (one forwarder
command per event), merged into what is there, and the trust step without which Codex skips
a hook silently: ``codex app-server`` lists the hooks (``hooks/list``) and hookgate's own are
trusted by their current hash (``config/batchWrite`` of ``hooks.state.<key>.trusted_hash``),
with the project trusted too when the hooks are the project's.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hookgate.coding_agents.forwarder import (
    PROMPT_TIMEOUT_S,
    Accept,
    command,
    hook_timeout_s,
    prompt_command,
)

__all__ = ["ROUTE", "CodexTrustFailed", "HookState", "hook_url", "hooks_block",
           "listed_hooks", "merge_into", "remove_from", "trust"]

ROUTE = "/api/codex/hooks"
_EVENTS = {"SessionStart": Accept.OBJECT, "UserPromptSubmit": Accept.EMPTY,
           "PreToolUse": Accept.EMPTY, "PostToolUse": Accept.OBJECT}
_TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse"})
#: The prompt's hook never blocks the prompt (forwarder.Refusal.GO_ON).
_PROMPT = "UserPromptSubmit"
_RPC_TIMEOUT_S = 60


class CodexTrustFailed(RuntimeError):
    """``codex app-server`` could not list or trust the hooks."""


def hook_url(server_url: str, agent_id: str, *, route: str = ROUTE) -> str:
    return f"{server_url.rstrip('/')}{route}?agent={quote(agent_id, safe='')}"


def hooks_block(server_url: str, agent_id: str, *, token_env: str,
                wait_s: float) -> dict[str, Any]:
    """``{"hooks": …}`` for ``agent_id``: one command handler per event."""
    url = hook_url(server_url, agent_id)
    hooks: dict[str, Any] = {}
    for event, accept in _EVENTS.items():
        handler = {"type": "command", "timeout": hook_timeout_s(wait_s),
                   "command": command(url, token_env=token_env, wait_s=wait_s,
                                      accept=accept)}
        if event == _PROMPT:
            handler = {"type": "command", "timeout": PROMPT_TIMEOUT_S,
                       "command": prompt_command(url, token_env=token_env, accept=accept)}
        group: dict[str, Any] = {"hooks": [handler]}
        if event in _TOOL_EVENTS:
            group = {"matcher": "*", **group}
        hooks[event] = [group]
    return {"hooks": hooks}


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    loaded = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(loaded, dict) or not isinstance(loaded.get("hooks", {}), dict):
        raise ValueError(f"{path} does not hold a JSON object with a 'hooks' object")
    return loaded


def merge_into(path: Path, block: dict[str, Any], *,
               ours: Callable[[Any], bool] | None = None) -> dict[str, Any]:
    """``path``'s hooks with hookgate's groups replacing earlier hookgate ones; everything
    else is kept (ours go last: Codex runs matching hooks concurrently). ``ours``: which
    entries are hookgate's, for an agent whose file has the same shape (Gemini CLI's,
    Cursor's)."""
    config = remove_from(path, ours=ours)
    hooks = config.setdefault("hooks", {})
    for event, groups in block["hooks"].items():
        hooks[event] = [*hooks.get(event, []), *groups]
    return config


def remove_from(path: Path, *, ours: Callable[[Any], bool] | None = None
                ) -> dict[str, Any]:
    """``path``'s configuration without hookgate's groups (empty events dropped)."""
    ours = ours or is_ours
    config = _load(path)
    hooks = config.get("hooks", {})
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = [g for g in groups if not ours(g)]
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    return config


def is_ours(group: Any, *, route: str = ROUTE) -> bool:
    handlers = group.get("hooks", []) if isinstance(group, dict) else []
    return any(isinstance(h, dict) and route in str(h.get("command") or "") for h in handlers)


class HookState:
    """One hook as ``codex app-server`` lists it."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.key = str(raw.get("key"))
        self.command = str(raw.get("command") or "")
        self.event = str(raw.get("eventName"))
        self.current_hash = str(raw.get("currentHash"))
        self.trusted = raw.get("trustStatus") == "trusted"
        self.enabled = bool(raw.get("enabled"))
        self.source_path = str(raw.get("sourcePath"))

    @property
    def ours(self) -> bool:
        return ROUTE in self.command


class _AppServer:
    """A ``codex app-server`` over stdio, for a few JSON-RPC requests."""

    def __init__(self, codex: str, cwd: Path, env: dict[str, str] | None) -> None:
        try:
            self.proc = subprocess.Popen(
                [codex, "app-server"], cwd=cwd, env=env, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError as exc:
            raise CodexTrustFailed(f"cannot start '{codex} app-server': {exc}") from None
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.proc.stdin.flush()

    def rpc(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(message, dict) and message.get("id") == self.next_id:
                if "error" in message:
                    raise CodexTrustFailed(f"codex app-server {method}: {message['error']}")
                return message.get("result")
        raise CodexTrustFailed(f"codex app-server ended before answering {method}")

    def __enter__(self) -> _AppServer:
        self.rpc("initialize", {"clientInfo": {"name": "hookgate", "version": "1"}})
        self.send({"method": "initialized"})
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait(_RPC_TIMEOUT_S)


def listed_hooks(codex: str, cwd: Path, env: dict[str, str] | None = None
                 ) -> list[HookState]:
    """The hooks Codex loads for ``cwd``, with their trust."""
    with _AppServer(codex, cwd, env) as server:
        return _list(server, cwd)


def _list(server: _AppServer, cwd: Path) -> list[HookState]:
    result = server.rpc("hooks/list", {"cwds": [str(cwd)]})
    out: list[HookState] = []
    for entry in (result or {}).get("data", []):
        out.extend(HookState(h) for h in entry.get("hooks", []) if isinstance(h, dict))
    return out


def trust(codex: str, cwd: Path, *, project: bool,
          env: dict[str, str] | None = None) -> list[HookState]:
    """Trust hookgate's hooks as Codex lists them for ``cwd`` (and the project folder itself
    when ``project``); the hooks listed afterwards."""
    with _AppServer(codex, cwd, env) as server:
        if project:
            # Codex ignores an untrusted project's .codex/ folder, its hooks included.
            server.rpc("config/batchWrite", {"edits": [{
                "keyPath": f'projects."{cwd.resolve()}".trust_level', "value": "trusted",
                "mergeStrategy": "replace"}]})
        ours = [h for h in _list(server, cwd) if h.ours]
        if not ours:
            raise CodexTrustFailed("Codex does not list hookgate's hooks for "
                                   f"{cwd}; is the folder inside the project?")
        edits = [{"keyPath": f'hooks.state."{h.key}".trusted_hash', "value": h.current_hash,
                   "mergeStrategy": "replace"} for h in ours]
        server.rpc("config/batchWrite", {"edits": edits})
        after = _list(server, cwd)
    missing = [h.key for h in after if h.ours and not (h.trusted and h.enabled)]
    if missing:
        raise CodexTrustFailed(f"Codex still does not trust {', '.join(missing)}")
    return after
