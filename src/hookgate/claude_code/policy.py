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

from dataclasses import dataclass
from typing import Any

from hookgate.agent import Agent
from hookgate.claude_code.matchers import CommandMatch, PathMatch
from hookgate.claude_code.paths import PathFacts
from hookgate.external.policy import (
    ArgumentTest,
    CallRules,
    ExternalToolRan,
    RuleKeys,
    ToolRule,
    probe_context,
)
from hookgate.hooks.model import HookContext
from hookgate.tools.tool import Tool

__all__ = ["CONNECTOR", "DEFAULT_WAIT_S", "WRITING_TOOLS", "ExternalPolicy", "ExternalToolRan",
           "ToolRule", "connector_of", "probe_context"]

#: Claude Code's tools that change the machine; everything else reads.
WRITING_TOOLS = frozenset({"Bash", "Write", "Edit", "MultiEdit", "NotebookEdit",
                           "KillShell", "BashOutput"})
DEFAULT_WAIT_S = 20.0
CONNECTOR = "claude_code"


def _command(value: Any, *, allow_list: bool) -> ArgumentTest:
    match = CommandMatch.parse(value, allow_list=allow_list)
    return lambda ctx: match.applies(ctx.tool_args)


def _path(value: Any, *, outside: bool) -> ArgumentTest:
    match = PathMatch.parse(value, outside=outside)

    def test(ctx: HookContext) -> bool:
        facts = PathFacts.of(ctx.metadata.get("cwd"), ctx.metadata.get("transcript_path"))
        return match.applies(ctx.tool_args, facts)
    return test


#: Claude Code's own rule keys: commands parsed and normalised, paths resolved.
CLAUDE_CODE_KEYS: RuleKeys = {
    "command": lambda v: _command(v, allow_list=False),
    "command_not_in": lambda v: _command(v, allow_list=True),
    "path_under": lambda v: _path(v, outside=False),
    "path_outside": lambda v: _path(v, outside=True),
}


@dataclass(frozen=True, slots=True)
class ExternalPolicy(CallRules):
    """The ``claude_code`` section of an agent."""

    wait_s: float = DEFAULT_WAIT_S

    @classmethod
    def of(cls, agent: Agent) -> ExternalPolicy:
        """The agent's policy; HookBuildError says what is wrong with its declaration."""
        rules = CallRules.read(agent, "claude_code", default_wait_s=DEFAULT_WAIT_S,
                               keys=CLAUDE_CODE_KEYS)
        return cls(rules.rules, rules.wait_s)

    def tool_for(self, name: str, probe: HookContext) -> Tool:
        """The external Tool for a call (``probe`` carries its arguments and metadata)."""
        return self.tool(name, probe, writes=name in WRITING_TOOLS, connector=connector_of(name))


def connector_of(name: str) -> str:
    """A Claude Code tool's connector: ``mcp__<server>`` for an MCP tool, else claude_code."""
    if name.startswith("mcp__"):
        server = name[len("mcp__"):].split("__", 1)[0]
        return f"mcp__{server}"
    return CONNECTOR
