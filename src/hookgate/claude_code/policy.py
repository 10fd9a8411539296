"""Which of an agent's rules apply to a Claude Code tool call, and the Tool it becomes.

Declared under the agent's ``model_config_json.claude_code``::

    claude_code:
      wait_s: 20                 # how long a hook call waits for a person before deferring
      rules:
        - {matcher: Bash, command: [[git, push], [rm, -rf]], requires_confirmation: true,
           reason: "pushes and deletions are hard to undo"}
        - {path_outside: "{cwd}", requires_confirmation: true}

Matchers and ``when`` are the declarative hooks' own (hookgate.matching);
``command``, ``command_not_in``, ``path_under`` and ``path_outside`` are claude_code.matchers'
(commands parsed and normalised, paths resolved), and every key given must hold. Tools
that change files or run commands count as writes (read-only orgs refuse them) unless a
rule says ``writes: false``; ``mcp__<server>__<tool>`` has connector ``mcp__<server>``.
A rule's ``reason`` is shown to the approver, with the rule, when it asked for a person.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookgate.agent import Agent
from hookgate.claude_code.matchers import CommandMatch, PathMatch
from hookgate.claude_code.paths import PathFacts
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookContext, HookPoint
from hookgate.matching import Condition, ToolMatcher, selects
from hookgate.tools.tool import Tool

#: Claude Code's tools that change the machine; everything else reads.
WRITING_TOOLS = frozenset({"Bash", "Write", "Edit", "MultiEdit", "NotebookEdit",
                           "KillShell", "BashOutput"})
DEFAULT_WAIT_S = 20.0
CONNECTOR = "claude_code"
_RULE_KEYS = frozenset({"matcher", "when", "requires_confirmation", "writes", "connector",
                        "command", "command_not_in", "path_under", "path_outside", "reason"})
#: The longest ``reason`` of a rule (it goes on approval cards).
REASON_CHARS = 500
_KEYS = frozenset({"wait_s", "rules"})


class ExternalToolRan(RuntimeError):
    """Raised if anything tried to run a Claude Code tool inside hookgate."""


def _never_run(**_: Any) -> None:
    raise ExternalToolRan("Claude Code's tools run in Claude Code, never in hookgate")


@dataclass(frozen=True, slots=True)
class ToolRule:
    matcher: ToolMatcher
    when: Condition | None
    requires_confirmation: bool | None
    writes: bool | None
    connector: str | None
    commands: tuple[CommandMatch, ...] = ()
    paths: tuple[PathMatch, ...] = ()
    #: Where the rule is declared and what it says, as the approver reads it.
    described: str = ""

    def applies(self, ctx: HookContext) -> bool:
        # A rule whose `when` cannot be evaluated applies (fail closed), and so does one
        # whose command or paths cannot be read for certain (claude_code.matchers).
        if not selects(self.matcher, self.when, ctx)[0]:
            return False
        args = ctx.tool_args
        if not all(match.applies(args) for match in self.commands):
            return False
        facts = PathFacts.of(ctx.metadata.get("cwd"), ctx.metadata.get("transcript_path"))
        return all(match.applies(args, facts) for match in self.paths)


@dataclass(frozen=True, slots=True)
class ExternalPolicy:
    rules: tuple[ToolRule, ...] = ()
    wait_s: float = DEFAULT_WAIT_S

    @classmethod
    def of(cls, agent: Agent) -> ExternalPolicy:
        """The agent's policy; HookBuildError says what is wrong with its declaration."""
        decl = (agent.model_config_json or {}).get("claude_code") or {}
        if not isinstance(decl, Mapping):
            raise HookBuildError(f"agent '{agent.id}': model_config_json.claude_code must be "
                                 "a mapping")
        unknown = sorted(str(k) for k in decl if k not in _KEYS)
        if unknown:
            raise HookBuildError(f"agent '{agent.id}': claude_code has unknown keys "
                                 f"{', '.join(unknown)} (known: wait_s, rules)")
        wait = decl.get("wait_s", DEFAULT_WAIT_S)
        if (isinstance(wait, bool) or not isinstance(wait, int | float)
                or not math.isfinite(wait) or wait < 0):
            raise HookBuildError(f"agent '{agent.id}': claude_code.wait_s must be a number "
                                 f"of seconds >= 0, got {wait!r}")
        rules = decl.get("rules") or []
        if not isinstance(rules, list):
            raise HookBuildError(f"agent '{agent.id}': claude_code.rules must be a list")
        return cls(tuple(_rule(agent, i, r) for i, r in enumerate(rules)), float(wait))

    def tool_for(self, name: str, probe: HookContext) -> Tool:
        """The external Tool for a call (``probe`` carries its arguments and metadata)."""
        writes = name in WRITING_TOOLS
        needs = False
        asked: list[str] = []
        connector = _connector(name)
        for rule in self.rules:
            if not rule.applies(probe):
                continue
            if rule.requires_confirmation:
                needs = True
                asked.append(rule.described)
            if rule.writes is not None:
                writes = rule.writes
            if rule.connector is not None:
                connector = rule.connector
        # Claude Code's hook input carries no description of the tool: none is made up.
        return Tool(name=name, description="", parameters={"type": "object"}, _fn=_never_run,
                    requires_confirmation=needs, connector=connector, writes=writes,
                    confirmation_reason="; ".join(asked) or None)


def probe_context(name: str, args: dict[str, Any], agent: Agent, user_id: str,
                  metadata: dict[str, Any]) -> HookContext:
    return HookContext(hook_point=HookPoint.PRE_TOOL_USE, tool_name=name, tool_args=args,
                       agent_id=agent.id, user_id=user_id, metadata=metadata)


def _connector(name: str) -> str:
    if name.startswith("mcp__"):
        server = name[len("mcp__"):].split("__", 1)[0]
        return f"mcp__{server}"
    return CONNECTOR


def _rule(agent: Agent, index: int, entry: object) -> ToolRule:
    where = f"agent '{agent.id}': claude_code.rules[{index}]"
    if not isinstance(entry, Mapping):
        raise HookBuildError(f"{where} must be a mapping")
    unknown = sorted(str(k) for k in entry if k not in _RULE_KEYS)
    if unknown:
        raise HookBuildError(f"{where}: unknown keys {', '.join(unknown)} (known: "
                             f"{', '.join(sorted(_RULE_KEYS))})")
    try:
        matcher = ToolMatcher.parse(entry.get("matcher"))
        when = Condition(entry["when"]) if entry.get("when") is not None else None
    except HookBuildError as exc:
        raise HookBuildError(f"{where}: {exc}") from None
    flags = {}
    for key in ("requires_confirmation", "writes"):
        value = entry.get(key)
        if value is not None and not isinstance(value, bool):
            raise HookBuildError(f"{where}: '{key}' must be true or false")
        flags[key] = value
    connector = entry.get("connector")
    if connector is not None and (not isinstance(connector, str) or not connector):
        raise HookBuildError(f"{where}: 'connector' must be a non-empty string")
    try:
        commands = tuple(CommandMatch.parse(entry[key], allow_list=key == "command_not_in")
                         for key in ("command", "command_not_in") if key in entry)
        paths = tuple(PathMatch.parse(entry[key], outside=key == "path_outside")
                      for key in ("path_under", "path_outside") if key in entry)
    except HookBuildError as exc:
        raise HookBuildError(f"{where}: {exc}") from None
    reason = entry.get("reason")
    if reason is not None and (not isinstance(reason, str) or not reason.strip()
                               or len(reason) > REASON_CHARS):
        raise HookBuildError(f"{where}: 'reason' must be a non-empty string of at most "
                             f"{REASON_CHARS} characters")
    return ToolRule(matcher, when, flags["requires_confirmation"], flags["writes"], connector,
                    commands, paths, _described(agent, index, entry, reason))


def _described(agent: Agent, index: int, entry: Mapping[str, Any], reason: str | None) -> str:
    # "claude_code.rules[0] of agent 'coder' (matcher Bash, command git push): why".
    shown = [f"{key} {_shown(entry[key])}" for key in
             ("matcher", "when", "command", "command_not_in", "path_under", "path_outside")
             if entry.get(key) is not None]
    what = f" ({', '.join(shown)})" if shown else ""
    said = f": {reason.strip()}" if reason else ""
    return f"claude_code.rules[{index}] of agent '{agent.id}'{what}{said}"


def _shown(value: object) -> str:
    # [[git, push], [rm, -rf]] reads "git push | rm -rf".
    if isinstance(value, list) and any(isinstance(v, list) for v in value):
        return " | ".join(_shown(v) for v in value)
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value)
