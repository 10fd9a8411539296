"""Import a Claude Code ``settings.json`` hooks block as it is, from a path or inline.

Declared per agent as ``model_config_json.hooks.claude_code``: a path to a settings file, or
``{settings: PATH | {hooks: …}, project_dir, priority, fail_mode}``. Every event hookgate has
an equivalent for becomes one group in the chain (group.py); an event without one is kept
as a note that ``hookgate check`` prints, saying what it does here (nothing fires).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hookgate.catalog.declarative.command import SHELLS, CommandRunner
from hookgate.catalog.declarative.group import GROUP_CLASSES, Handler, PermissionRule, _Group
from hookgate.catalog.declarative.hook import Transport
from hookgate.catalog.declarative.http_hook import HttpEndpoint
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import FailMode
from hookgate.matching import ToolMatcher

#: Claude Code's default handler timeout, in seconds.
CLAUDE_CODE_TIMEOUT = 600.0
DEFAULT_PRIORITY = 100
_OPTIONS = frozenset({"settings", "project_dir", "priority", "fail_mode", "plugin_root"})
_HANDLER_KEYS = frozenset({"type", "command", "url", "headers", "allowedEnvVars", "timeout",
                           "async", "statusMessage", "once", "if", "shell", "fail_mode",
                           "onFailure"})
#: What an event without a hookgate equivalent does when imported, for ``hookgate check``.
UNMAPPED = {
    "UserPromptSubmit": "hookgate runs take their message at the start; SessionStart "
                        "hooks see it as metadata.message. These handlers never run.",
    "PermissionRequest": "hookgate has no permission prompt: calls that need a person go "
                         "to the approval gate. These handlers never run.",
    "Stop": "a hookgate run ends when the model answers; nothing can send it back. "
            "These handlers never run.",
    "SubagentStop": "delegated agents end like runs; these handlers never run.",
    "Notification": "hookgate notifies through its channels; these handlers never run.",
    "PreCompact": "hookgate does not compact a conversation; these handlers never run.",
    "SessionEnd": "these handlers never run; the audit log records how a run ended.",
}
_RULE = re.compile(r"([A-Za-z0-9_-]+)(?:\((.*)\))?")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def groups_from_declaration(value: object, agent_id: str) -> list[_Group]:
    """The groups for an agent's ``claude_code`` entry; HookBuildError says what is wrong."""
    options: Mapping[str, Any] = value if isinstance(value, Mapping) and "hooks" not in value \
        else {"settings": value}
    unknown = sorted(str(k) for k in options if k not in _OPTIONS)
    if unknown:
        raise HookBuildError(f"claude_code: unknown keys {', '.join(unknown)} (known: "
                             f"{', '.join(sorted(_OPTIONS))})")
    settings, base = _settings(options.get("settings"))
    project = options.get("project_dir") or (str(base.parent) if base else os.getcwd())
    if not isinstance(project, str) or not os.path.isdir(project):
        raise HookBuildError(f"claude_code.project_dir {project!r} is not a directory")
    priority = options.get("priority", DEFAULT_PRIORITY)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise HookBuildError(f"claude_code.priority must be a whole number, got {priority!r}")
    fail_mode = _fail_mode(options.get("fail_mode", "closed"), "claude_code.fail_mode")
    plugin_root = options.get("plugin_root")
    extra_env = {"CLAUDE_PLUGIN_ROOT": str(plugin_root)} if plugin_root else {}
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, Mapping):
        raise HookBuildError("claude_code: 'hooks' must map event names to matcher groups")
    out: list[_Group] = []
    notes: list[str] = []
    for event, groups in hooks.items():
        where = f"claude_code.hooks.{event}"
        handlers = _handlers(where, groups, project, fail_mode, extra_env)
        if event not in GROUP_CLASSES:
            why = UNMAPPED.get(str(event), "hookgate has no such event; these handlers never "
                                           "run.")
            notes.append(f"{event} ({len(handlers)} handler(s)): {why}")
            continue
        cls = GROUP_CLASSES[event]
        out.append(cls(event, handlers, name=f"claude_code:{event}", priority=priority,
                       project_dir=project, notes=[]))
    if out:
        out[0].notes.extend(notes)
    elif notes:
        raise HookBuildError("claude_code: no event in this block has a hookgate equivalent: "
                             + " ".join(notes))
    return out


def _settings(value: object) -> tuple[Mapping[str, Any], Path | None]:
    if isinstance(value, Mapping):
        return value, None
    if not isinstance(value, str) or not value:
        raise HookBuildError("claude_code.settings must be a path to a settings.json or the "
                             "settings object itself")
    path = Path(value)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise HookBuildError(f"claude_code: cannot read {value}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise HookBuildError(f"claude_code: {value} is not valid JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise HookBuildError(f"claude_code: {value} must hold a JSON object")
    # .claude/settings.json lives in the project; its parent's parent is the project.
    base = path.resolve().parent
    return data, base if base.name == ".claude" else base / ".claude"


def _handlers(where: str, groups: object, project: str, fail_mode: FailMode,
              extra_env: Mapping[str, str]) -> list[Handler]:
    if not isinstance(groups, list):
        raise HookBuildError(f"{where} must be a list of matcher groups")
    out = []
    for gi, group in enumerate(groups):
        if not isinstance(group, Mapping) or not isinstance(group.get("hooks"), list):
            raise HookBuildError(f"{where}[{gi}] must be {{matcher, hooks: [...]}}")
        matcher = ToolMatcher.parse(group.get("matcher"))
        for hi, entry in enumerate(group["hooks"]):
            label = f"{where}[{gi}].hooks[{hi}]"
            out.append(_handler(label, entry, matcher, project, fail_mode, extra_env))
    return out


def _handler(label: str, entry: object, matcher: ToolMatcher, project: str,
             fail_mode: FailMode, extra_env: Mapping[str, str]) -> Handler:
    if not isinstance(entry, Mapping):
        raise HookBuildError(f"{label} must be a mapping")
    kind = entry.get("type", "command")
    if kind not in ("command", "http"):
        raise HookBuildError(f"{label}: handler type {kind!r} needs Claude Code's own model "
                             "or MCP client and cannot run in hookgate (command and http can)")
    unknown = sorted(str(k) for k in entry if k not in _HANDLER_KEYS)
    if unknown:
        raise HookBuildError(f"{label}: unknown keys {', '.join(unknown)}")
    transport: Transport
    if kind == "command":
        shell = entry.get("shell", "sh")
        if shell not in SHELLS:
            raise HookBuildError(f"{label}: shell {shell!r} is not available here "
                                 f"({', '.join(SHELLS)})")
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise HookBuildError(f"{label}: a command handler needs 'command'")
        transport = CommandRunner(command, project, SHELLS[shell], dict(extra_env))
    else:
        allowed = entry.get("allowedEnvVars") or []
        headers = entry.get("headers") or {}
        if not isinstance(allowed, list) or not isinstance(headers, Mapping):
            raise HookBuildError(f"{label}: 'headers' is a mapping, 'allowedEnvVars' a list")
        endpoint = HttpEndpoint.from_declaration(
            {"url": entry.get("url"),
             "headers": {str(k): _interpolate(str(v), allowed) for k, v in headers.items()}})
        transport = HttpEndpoint(endpoint.url, endpoint.headers, project)
    timeout = entry.get("timeout", CLAUDE_CODE_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise HookBuildError(f"{label}: 'timeout' must be a positive number of seconds")
    rule = entry.get("if")
    return Handler(
        label=label, transport=transport, matcher=matcher, timeout=float(timeout),
        fail_mode=_fail_mode(entry.get("fail_mode", fail_mode), f"{label}.fail_mode"),
        rule=_rule(rule, label) if rule is not None else None,
        background=bool(entry.get("async", False)), once=bool(entry.get("once", False)),
    )


def _rule(text: object, label: str) -> PermissionRule:
    match = _RULE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise HookBuildError(f"{label}: 'if' must be a permission rule such as 'Bash(git *)'")
    return PermissionRule(match.group(1), match.group(2))


def _interpolate(value: str, allowed: list[Any]) -> str:
    # Claude Code's header rule: $VAR / ${VAR} only for names listed in allowedEnvVars.
    def swap(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return os.environ.get(name, "") if name in allowed else m.group(0)

    return _VAR.sub(swap, value)


def _fail_mode(value: object, where: str) -> FailMode:
    if value == "closed":
        return "closed"
    if value == "open":
        return "open"
    raise HookBuildError(f"{where} must be 'closed' or 'open', got {value!r}")
