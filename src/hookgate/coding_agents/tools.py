"""The coding agents' tool names and arguments in hookgate's words, so that one rule applies
to every agent: each agent's shell tool is ``Bash`` with ``{"command": <text>}`` (the name and
shape Claude Code's rules use), and an MCP tool keeps its ``mcp__<server>__<tool>`` name.
"""

from __future__ import annotations

import shlex
import unicodedata
from collections.abc import Mapping
from typing import Any

__all__ = ["SHELL", "SHELL_NAMES", "UnmappableCall", "connector_of", "hookgate_call", "mcp_tool",
           "writes"]

#: hookgate's name of a shell command, whichever agent runs it.
SHELL = "Bash"
#: The agents' own names of their shell tool (Codex, Gemini CLI, Copilot CLI, Cursor).
SHELL_NAMES = frozenset({"Bash", "exec_command", "shell", "local_shell", "run_shell_command",
                         "bash", "shellCommand", "Shell"})
#: Tools that change the machine besides the shell (file edits and patches).
WRITING = frozenset({"Bash", "Write", "Edit", "MultiEdit", "NotebookEdit", "apply_patch",
                     "write_file", "replace", "edit", "create"})


class UnmappableCall(ValueError):
    """A shell call whose command is neither text nor a list of words, that carries two
    different commands, or a name that only looks like a shell tool's."""


def _folded(name: str) -> str:
    """``name`` without case, width, surrounding space or invisible (format) characters."""
    text = unicodedata.normalize("NFKC", name).casefold()
    return "".join(c for c in text if unicodedata.category(c) != "Cf").strip()


_FOLDED_SHELL_NAMES = frozenset(map(_folded, SHELL_NAMES))


def hookgate_call(name: str, arguments: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The tool name and arguments hookgate's rules see for an agent's call. A name that is
    a shell tool's but for case, width, spaces or invisible characters is refused: rules
    match exact names, and an agent that runs it as its shell would run it unchecked."""
    if name not in SHELL_NAMES:
        if _folded(name) in _FOLDED_SHELL_NAMES:
            raise UnmappableCall(f"{name!r} is not the exact name of a shell tool, which it "
                                 "looks like")
        return name, dict(arguments)
    args = dict(arguments)
    command = args.pop("command", None)
    other = args.pop("cmd", None)
    if command is None:
        command = other
    elif other is not None and other != command:
        # Which one the agent runs is its own business: neither is judged alone.
        raise UnmappableCall(f"the {name} call carries two different commands "
                             "('command' and 'cmd')")
    if isinstance(command, list) and all(isinstance(w, str) for w in command):
        command = shlex.join(command)
    if not isinstance(command, str):
        raise UnmappableCall(f"the {name} call carries no command text")
    return SHELL, {"command": command, **args}


def mcp_tool(server: str, tool: str) -> str:
    """hookgate's name of MCP server ``server``'s tool ``tool`` (Claude Code's and Codex's)."""
    return f"mcp__{server}__{tool}"


def writes(name: str) -> bool:
    """Whether a call of ``name`` (hookgate's name) changes the machine."""
    return name in WRITING


def connector_of(agent_kind: str, name: str) -> str:
    """``mcp__<server>`` for an MCP tool, else the coding agent's own name (``codex``)."""
    if name.startswith("mcp__"):
        return "mcp__" + name[len("mcp__"):].split("__", 1)[0]
    return agent_kind
