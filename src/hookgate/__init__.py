"""hookgate: hooks that make rules about an LLM agent's tool calls hold.

The names here are the public contract (SPEC §1–§3). Each loads on first use (PEP 562), so
a process that needs one name — the CLI, a server — does not import every engine. Importing
it installs the engines' default registry builder (hookgate.engines.registries).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from hookgate.engines.registries import use_default_builder

if TYPE_CHECKING:
    from hookgate.agent import Agent
    from hookgate.catalog import build_registry
    from hookgate.engines import DAGEngine, ReActEngine, RunEvent, RunResult, RunState
    from hookgate.hooks import (
        HookBuildError,
        HookContext,
        HookPoint,
        HookRegistry,
        HookResult,
        HookServices,
        PostToolUseHook,
        PreToolUseHook,
        SessionStartHook,
    )
    from hookgate.llm import ScriptedLLM
    from hookgate.tools import Tool, ToolCall, ToolOutcome, tool

from hookgate.version import __version__


def _catalog_registry(agent: Agent, services: HookServices) -> HookRegistry:
    """The engines' default registry builder: the agent's declared hooks and the approval
    gate (SPEC §1.6-7). The catalog loads on the first build, not on ``import hookgate``."""
    from hookgate.catalog.build import build_registry

    return build_registry(agent, services)


# This package sits above every layer and runs before any hookgate.engines module, so an
# engine constructed without ``registries=`` always finds this default (decision 0005).
use_default_builder(_catalog_registry)

#: Where each public name lives.
_HOMES = {
    "Agent": "hookgate.agent",
    "HookServices": "hookgate.hooks",
    "build_registry": "hookgate.catalog",
    "DAGEngine": "hookgate.engines",
    "ReActEngine": "hookgate.engines",
    "RunEvent": "hookgate.engines",
    "RunResult": "hookgate.engines",
    "RunState": "hookgate.engines",
    "HookBuildError": "hookgate.hooks",
    "HookContext": "hookgate.hooks",
    "HookPoint": "hookgate.hooks",
    "HookRegistry": "hookgate.hooks",
    "HookResult": "hookgate.hooks",
    "PostToolUseHook": "hookgate.hooks",
    "PreToolUseHook": "hookgate.hooks",
    "SessionStartHook": "hookgate.hooks",
    "ScriptedLLM": "hookgate.llm",
    "Tool": "hookgate.tools",
    "ToolCall": "hookgate.tools",
    "ToolOutcome": "hookgate.tools",
    "tool": "hookgate.tools",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'hookgate' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


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
