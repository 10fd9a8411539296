"""Tools and the one guarded path through which every engine calls them (SPEC §2)."""

from hookgate.tools.calls import CallIdentity, ToolCall, ToolOutcome
from hookgate.tools.errors import (
    ToolArgumentsError,
    ToolDefinitionError,
    ToolError,
    UnknownToolError,
)
from hookgate.tools.guarded import APPROVED_DIGEST_KEY, execute_tool_call, render_observation
from hookgate.tools.ledger import ExecutionLedger, InMemoryLedger, PriorExecution
from hookgate.tools.tool import Tool, args_digest, tool

__all__ = [
    "APPROVED_DIGEST_KEY",
    "CallIdentity",
    "ExecutionLedger",
    "InMemoryLedger",
    "PriorExecution",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolDefinitionError",
    "ToolError",
    "ToolOutcome",
    "UnknownToolError",
    "args_digest",
    "execute_tool_call",
    "render_observation",
    "tool",
]
