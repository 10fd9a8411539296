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


def waiting_request(exc: BaseException) -> str | None:
    """The id of the request a hook's exception says its call waits on, or None.

    The approval gate, given a wait that runs out before anyone decides (the guarded-call
    API, Claude Code), raises with the still-pending ``request`` it made: the call then
    waits for a person, the normal path, not a hook failure.
    """
    request = getattr(exc, "request", None)
    if getattr(request, "pending", False) is not True:
        return None
    found = getattr(request, "id", None)
    return found if isinstance(found, str) else None
