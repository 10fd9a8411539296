"""Hook-up point for declarative hooks (command, Python and HTTP hooks) in a declaration."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.registry import HookRegistry

if TYPE_CHECKING:
    from hookgate.agent import Agent
    from hookgate.catalog.build import BuildEnv

FailFactory = Callable[["Agent", str, object], HookBuildError]


def add_declarative_hooks(
    registry: HookRegistry, env: BuildEnv, decl: Mapping[str, Any], fail: FailFactory
) -> None:
    """Add ``command_hooks``, ``python_hooks`` and ``http_hooks`` entries to ``registry``."""
    for section in ("command_hooks", "python_hooks", "http_hooks"):
        if decl.get(section):
            raise fail(env.agent, f"hooks.{section} is not supported by this build", None)
