"""Which of an agent's rules apply to a coding agent's tool call (Claude Code, Codex, ...),
and how long such a call waits for a person inside one hook call.

Declared under the agent's ``model_config_json.coding_agents`` (``claude_code`` is the same
section under its first name, kept: an agent declares one of the two)::

    coding_agents:
      wait_s: 20                 # how long a hook call waits for a person
      rules:
        - {matcher: Bash, command: [[git, push], [rm, -rf]], requires_confirmation: true,
           reason: "pushes and deletions are hard to undo"}
        - {path_outside: "{cwd}", requires_confirmation: true}

Matchers and ``when`` are the declarative hooks' own (hookgate.matching); ``command``,
``command_not_in``, ``path_under`` and ``path_outside`` are external.coding.matchers'
(commands parsed and normalised, paths resolved), and every key given must hold. A rule's
``reason`` is shown to the approver, with the rule, when it asked for a person.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from hookgate.agent import Agent
from hookgate.external.coding.matchers import CommandMatch, PathMatch
from hookgate.external.coding.paths import PathFacts
from hookgate.external.policy import ArgumentTest, CallRules, RuleKeys
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookContext

__all__ = ["DEFAULT_WAIT_S", "SECTION", "SECTIONS", "CodingAgentPolicy", "declares_coding_rules",
           "section_of"]

#: The section's name, and every name it may be declared under (the first name kept).
SECTION = "coding_agents"
SECTIONS = (SECTION, "claude_code")
DEFAULT_WAIT_S = 20.0


def _command(value: Any, *, allow_list: bool) -> ArgumentTest:
    match = CommandMatch.parse(value, allow_list=allow_list)
    return lambda ctx: match.applies(ctx.tool_args)


def _path(value: Any, *, outside: bool) -> ArgumentTest:
    match = PathMatch.parse(value, outside=outside)

    def test(ctx: HookContext) -> bool:
        facts = PathFacts.of(ctx.metadata.get("cwd"), ctx.metadata.get("transcript_path"))
        return match.applies(ctx.tool_args, facts)
    return test


#: The coding agents' own rule keys: commands parsed and normalised, paths resolved.
CODING_AGENT_KEYS: RuleKeys = {
    "command": lambda v: _command(v, allow_list=False),
    "command_not_in": lambda v: _command(v, allow_list=True),
    "path_under": lambda v: _path(v, outside=False),
    "path_outside": lambda v: _path(v, outside=True),
}


def section_of(agent: Agent) -> str | None:
    """The name the agent declares its coding-agent rules under (None: it declares none);
    HookBuildError when it declares both names."""
    declared = [name for name in SECTIONS if name in (agent.model_config_json or {})]
    if len(declared) > 1:
        raise HookBuildError(f"agent '{agent.id}': model_config_json declares both "
                             f"{' and '.join(declared)}, one section under two names; keep "
                             f"{SECTION}")
    return declared[0] if declared else None


def declares_coding_rules(config: Mapping[str, Any] | None) -> bool:
    """Whether a ``model_config_json`` declares the coding agents' section (either name)."""
    return any(name in (config or {}) for name in SECTIONS)


@dataclass(frozen=True, slots=True)
class CodingAgentPolicy(CallRules):
    """An agent's rules for its coding agents' calls."""

    wait_s: float = DEFAULT_WAIT_S

    @classmethod
    def of(cls, agent: Agent) -> Self:
        """The agent's policy; HookBuildError says what is wrong with its declaration."""
        rules = CallRules.read(agent, section_of(agent) or SECTION,
                               default_wait_s=DEFAULT_WAIT_S, keys=CODING_AGENT_KEYS)
        return cls(rules.rules, rules.wait_s)
