"""Claude Code's side of the coding agents' rules: its tools that write, its connectors, and
the stand-in Tool a call becomes. The rules themselves (the ``coding_agents:`` section,
first named ``claude_code:``) are hookgate.external.coding.policy's, which Codex and every
later coding agent read too; ``ExternalPolicy`` is that policy with Claude Code's tools.
"""

from __future__ import annotations

from dataclasses import dataclass

from hookgate.external.coding.policy import DEFAULT_WAIT_S, CodingAgentPolicy
from hookgate.external.policy import ExternalToolRan, ToolRule, probe_context
from hookgate.hooks.model import HookContext
from hookgate.tools.tool import Tool

__all__ = ["CONNECTOR", "DEFAULT_WAIT_S", "WRITING_TOOLS", "ExternalPolicy", "ExternalToolRan",
           "ToolRule", "connector_of", "probe_context"]

#: Claude Code's tools that change the machine; everything else reads.
WRITING_TOOLS = frozenset({"Bash", "Write", "Edit", "MultiEdit", "NotebookEdit",
                           "KillShell", "BashOutput"})
CONNECTOR = "claude_code"


@dataclass(frozen=True, slots=True)
class ExternalPolicy(CodingAgentPolicy):
    """The agent's coding-agent rules, for Claude Code's tools."""

    def tool_for(self, name: str, probe: HookContext) -> Tool:
        """The external Tool for a call (``probe`` carries its arguments and metadata)."""
        return self.tool(name, probe, writes=name in WRITING_TOOLS, connector=connector_of(name))


def connector_of(name: str) -> str:
    """A Claude Code tool's connector: ``mcp__<server>`` for an MCP tool, else claude_code."""
    if name.startswith("mcp__"):
        server = name[len("mcp__"):].split("__", 1)[0]
        return f"mcp__{server}"
    return CONNECTOR
