"""A channel's ``retry`` setting: how often and how long delivery to a platform retries.

Kept apart from the sender (``delivery``) so that checking a configuration reads it without
importing the HTTP client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookgate.channels.base import ChannelConfigError


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 30.0
    total_timeout: float = 60.0
    request_timeout: float = 10.0

    @classmethod
    def from_config(cls, platform: str, value: Any) -> RetryPolicy:
        """Read the optional ``retry`` mapping of a channel's config."""
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise ChannelConfigError(f"{platform} channel: 'retry' must be a mapping")
        unknown = set(value) - set(cls.__dataclass_fields__)
        if unknown:
            raise ChannelConfigError(
                f"{platform} channel: unknown retry setting(s) {sorted(unknown)}"
            )
        for name, raw in value.items():
            if isinstance(raw, bool) or not isinstance(raw, int | float) or raw <= 0:
                raise ChannelConfigError(
                    f"{platform} channel: retry.{name} must be a positive number, got {raw!r}"
                )
        settings: dict[str, Any] = dict(value)
        if "max_attempts" in settings:
            settings["max_attempts"] = int(settings["max_attempts"])
        return cls(**settings)

    def backoff(self, attempt: int) -> float:
        """The wait after failed attempt number ``attempt`` (1-based) when none was asked."""
        return float(min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))
