"""Turn an agent's ``command_hooks``, ``python_hooks`` and ``http_hooks`` into hooks.

Every entry is checked completely before the agent runs: an unknown key, a missing command,
function or url, an unknown event, a bad matcher or ``when`` is a build error naming the
agent and ``hooks.<section>[<index>]``, and the agent does not run (SPEC §1.6).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hookgate.catalog.declarative.claude_settings import groups_from_declaration
from hookgate.catalog.declarative.command import KEYS as COMMAND_KEYS
from hookgate.catalog.declarative.command import CommandRunner
from hookgate.catalog.declarative.hook import HOOK_CLASSES, DeclaredHook, Transport
from hookgate.catalog.declarative.http_hook import KEYS as HTTP_KEYS
from hookgate.catalog.declarative.http_hook import HttpEndpoint
from hookgate.catalog.declarative.python_hook import KEYS as PYTHON_KEYS
from hookgate.catalog.declarative.python_hook import PythonCallable
from hookgate.hooks.errors import DuplicateHookError, HookBuildError
from hookgate.hooks.model import FailMode, HookPoint
from hookgate.hooks.registry import HookRegistry
from hookgate.matching import Condition, ToolMatcher
from hookgate.policies.shadow import mode_of, shadowed

if TYPE_CHECKING:
    from hookgate.agent import Agent
    from hookgate.catalog.build import BuildEnv

FailFactory = Callable[["Agent", str, object], HookBuildError]

#: Claude Code's default command-hook timeout; every declarative hook has one.
DEFAULT_TIMEOUT = 60.0
DEFAULT_PRIORITY = 100
COMMON_KEYS = frozenset({"event", "matcher", "when", "name", "priority", "fail_mode",
                         "timeout", "recheck_after_approval", "mode"})


@dataclass(frozen=True, slots=True)
class _Kind:
    keys: frozenset[str]
    transport: Callable[[Mapping[str, Any]], Transport]


SECTIONS: dict[str, _Kind] = {
    "command_hooks": _Kind(COMMAND_KEYS, CommandRunner.from_declaration),
    "python_hooks": _Kind(PYTHON_KEYS, PythonCallable.from_declaration),
    "http_hooks": _Kind(HTTP_KEYS, HttpEndpoint.from_declaration),
}


def add_declarative_hooks(
    registry: HookRegistry, env: BuildEnv, decl: Mapping[str, Any], fail: FailFactory
) -> None:
    """Add the ``command_hooks``, ``python_hooks`` and ``http_hooks`` entries and an imported
    Claude Code settings block (``claude_code``) to ``registry``."""
    for section, kind in SECTIONS.items():
        entries = decl.get(section)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise fail(env.agent, f"hooks.{section} must be a list, got "
                                  f"{type(entries).__name__}", entries)
        for index, entry in enumerate(entries):
            where = _where(section, index, entry)
            try:
                hook = build_hook(section, index, entry, kind)
                # ``mode: shadow``: evaluated on every call, recorded, never deciding.
                registry.register(shadowed(hook, mode_of(
                    entry.get("mode") if isinstance(entry, Mapping) else None, "mode", entry)))
            except (HookBuildError, DuplicateHookError) as exc:
                raise fail(env.agent, f"{where}: {exc}", entry) from exc
    imported = decl.get("claude_code")
    if imported is not None:
        try:
            for group in groups_from_declaration(imported, env.agent.id):
                registry.register(group)  # type: ignore[arg-type]
        except (HookBuildError, DuplicateHookError) as exc:
            raise fail(env.agent, f"hooks.{exc}", imported) from exc


def build_hook(section: str, index: int, entry: object, kind: _Kind) -> DeclaredHook:
    """One entry to its hook; raises HookBuildError saying what is wrong with it."""
    if not isinstance(entry, Mapping):
        raise HookBuildError(f"an entry must be a mapping, got {type(entry).__name__}")
    allowed = COMMON_KEYS | kind.keys
    unknown = sorted(str(k) for k in entry if k not in allowed)
    if unknown:
        raise HookBuildError(f"unknown keys {', '.join(map(repr, unknown))} (an entry takes "
                             f"{', '.join(sorted(allowed))})")
    point = _event(entry.get("event"))
    matcher = ToolMatcher.parse(entry.get("matcher"))
    when = Condition(entry["when"]) if entry.get("when") is not None else None
    if point is HookPoint.SESSION_START and (str(matcher) != "*" or when is not None):
        raise HookBuildError("SessionStart fires once per session, not per tool call: it "
                             "takes no 'matcher' or 'when'")
    recheck = _recheck(entry.get("recheck_after_approval", False), point)
    transport = kind.transport(entry)
    cls = HOOK_CLASSES[point]
    hook = cls(
        transport,
        name=_name(entry.get("name"), f"{section}[{index}]"),
        priority=_priority(entry.get("priority", DEFAULT_PRIORITY)),
        fail_mode=_fail_mode(entry.get("fail_mode", "closed")),
        timeout=_timeout(entry.get("timeout", DEFAULT_TIMEOUT)),
        matcher=matcher,
        when=when,
    )
    if recheck:
        hook.recheck_after_approval = True
    return hook


def _where(section: str, index: int, entry: object) -> str:
    name = entry.get("name") if isinstance(entry, Mapping) else None
    label = f"hooks.{section}[{index}]"
    return f"{label} {name!r}" if isinstance(name, str) else label


def _event(value: object) -> HookPoint:
    for point in HookPoint:
        if value == point.value:
            return point
    known = ", ".join(p.value for p in HookPoint)
    if value is None:
        raise HookBuildError(f"'event' is missing (one of {known})")
    raise HookBuildError(f"unknown event {value!r} (one of {known})")


def _name(value: object, default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str) or not value.strip():
        raise HookBuildError("'name' must be a non-empty string")
    return value.strip()


def _priority(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise HookBuildError(f"'priority' must be a whole number, got {value!r}")
    return value


def _recheck(value: object, point: HookPoint) -> bool:
    # A PreToolUse check whose answer can change while a person decides runs again after
    # the approval; at the other points there is no approval to come after.
    if not isinstance(value, bool):
        raise HookBuildError(f"'recheck_after_approval' must be true or false, got {value!r}")
    if value and point is not HookPoint.PRE_TOOL_USE:
        raise HookBuildError("'recheck_after_approval' applies to PreToolUse hooks only")
    return value


def _fail_mode(value: object) -> FailMode:
    if value == "closed":
        return "closed"
    if value == "open":
        return "open"
    raise HookBuildError(f"'fail_mode' must be 'closed' or 'open', got {value!r}")


def _timeout(value: object) -> float:
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or value <= 0):
        raise HookBuildError(f"'timeout' must be a positive number of seconds, got {value!r}")
    return float(value)
