"""Errors of the hook model."""

from __future__ import annotations


class HookError(Exception):
    """Base class of hook-model errors."""


class HookBuildError(HookError):
    """A registry cannot be built from an agent's hook declaration.

    The message names the agent and the entry, so the person who wrote the declaration
    can fix it without reading a traceback.
    """

    def __init__(self, message: str, *, agent_id: str | None = None, entry: object = None):
        super().__init__(message)
        self.agent_id = agent_id
        self.entry = entry


class DuplicateHookError(HookError):
    """Two hooks with one name were registered in one registry."""
