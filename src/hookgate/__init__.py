"""hookgate: hooks that make rules about an LLM agent's tool calls hold.

The names here are the public contract (SPEC §1–§3).
"""

from hookgate.agent import Agent
from hookgate.catalog import HookServices, build_registry
from hookgate.engines import DAGEngine, ReActEngine, RunEvent, RunResult, RunState
from hookgate.hooks import (
    HookBuildError,
    HookContext,
    HookPoint,
    HookRegistry,
    HookResult,
    PostToolUseHook,
    PreToolUseHook,
    SessionStartHook,
)
from hookgate.llm import ScriptedLLM
from hookgate.tools import Tool, ToolCall, ToolOutcome, tool

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "DAGEngine",
    "HookBuildError",
    "HookContext",
    "HookPoint",
    "HookRegistry",
    "HookResult",
    "HookServices",
    "PostToolUseHook",
    "PreToolUseHook",
    "ReActEngine",
    "RunEvent",
    "RunResult",
    "RunState",
    "ScriptedLLM",
    "SessionStartHook",
    "Tool",
    "ToolCall",
    "ToolOutcome",
    "__version__",
    "build_registry",
    "tool",
]
