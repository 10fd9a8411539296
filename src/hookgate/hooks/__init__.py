"""The hook model (SPEC §1): points, context, results, the three bases and the registry.

This package imports nothing else from hookgate; every other room depends on it.
"""

from hookgate.hooks.errors import DuplicateHookError, HookBuildError, HookError
from hookgate.hooks.model import (
    FailMode,
    Hook,
    HookContext,
    HookPoint,
    HookResult,
    PostToolUseHook,
    PreToolUseHook,
    SessionStartHook,
    is_hook,
)
from hookgate.hooks.registry import HookRegistry
from hookgate.hooks.services import HookServices
from hookgate.hooks.trace import ChainResult, HookEvent
from hookgate.hooks.withheld import Withheld

__all__ = [
    "ChainResult",
    "DuplicateHookError",
    "FailMode",
    "Hook",
    "HookBuildError",
    "HookContext",
    "HookError",
    "HookEvent",
    "HookPoint",
    "HookRegistry",
    "HookResult",
    "HookServices",
    "PostToolUseHook",
    "PreToolUseHook",
    "SessionStartHook",
    "Withheld",
    "is_hook",
]
