"""Per-type checks of a channel's ``config`` mapping: the channels package registers them,
the configuration loader (above it) asks them.

The loader keeps ``channels[i].config`` a plain mapping and asks the validator registered
for the channel's type (if any) to check it, so secrets and endpoints are verified at load
time by the code that knows the platform, without the loader knowing any platform.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: Checks a channel's config: raises ValueError (pydantic's ValidationError is one; any other
#: exception is reported the same way) when it is unusable, and may return a normalised
#: mapping (defaults filled in) to use instead.
ChannelValidator = Callable[[dict[str, Any]], Mapping[str, Any] | None]

BUILTIN_CHANNEL_TYPES: tuple[str, ...] = ("feishu", "slack", "wecom", "telegram",
                                         "teams", "discord", "email", "ntfy")

_validators: dict[str, ChannelValidator] = {}


def register_channel_validator(channel_type: str, fn: ChannelValidator) -> None:
    """Check every ``type: channel_type`` channel's config with ``fn`` (replaces any earlier).

    Registering a type that is not built in also makes it a valid ``type``.
    """
    if not channel_type or not isinstance(channel_type, str):
        raise ValueError("a channel type must be a non-empty string")
    _validators[channel_type] = fn


def unregister_channel_validator(channel_type: str) -> None:
    """Stop checking ``channel_type`` configs (no error when none was registered)."""
    _validators.pop(channel_type, None)


def channel_validator(channel_type: str) -> ChannelValidator | None:
    return _validators.get(channel_type)


def channel_types() -> tuple[str, ...]:
    """The channel types a configuration may name: the built-in ones and any registered."""
    return (*BUILTIN_CHANNEL_TYPES, *sorted(set(_validators) - set(BUILTIN_CHANNEL_TYPES)))
