"""Reading a channel's configuration mapping, with errors that name the missing setting."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hookgate.channels.base import ChannelConfigError
from hookgate.channels.delivery import RetryPolicy
from hookgate.channels.masking import secret_patterns


class ConfigReader:
    """Typed access to one channel type's config; every error says which key and why."""

    def __init__(self, channel_type: str, config: Mapping[str, Any]) -> None:
        if not isinstance(config, Mapping):
            raise ChannelConfigError(f"{channel_type} channel: config must be a mapping")
        self.channel_type = channel_type
        self.config = config

    def error(self, message: str) -> ChannelConfigError:
        return ChannelConfigError(f"{self.channel_type} channel: {message}")

    def required(self, key: str, what: str) -> str:
        """A required non-empty string; ``what`` tells the user where to find it."""
        value = self.config.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise self.error(f"config is missing '{key}' ({what})")
        if not isinstance(value, str):
            raise self.error(f"'{key}' must be a string, got {type(value).__name__}")
        return value

    def optional(self, key: str, default: str | None = None) -> str | None:
        value = self.config.get(key)
        if value is None or value == "":
            return default
        if not isinstance(value, str):
            raise self.error(f"'{key}' must be a string, got {type(value).__name__}")
        return value

    def flag(self, key: str) -> bool:
        value = self.config.get(key, False)
        if not isinstance(value, bool):
            raise self.error(f"'{key}' must be true or false, got {value!r}")
        return value

    def base_url(self, default: str) -> str:
        url = self.optional("base_url", default) or default
        if not url.startswith(("https://", "http://")):
            raise self.error(f"'base_url' must be an http(s) URL, got {url!r}")
        return url

    def mask_patterns(self) -> tuple[str, ...]:
        """The default secret-key patterns plus the config's ``mask_patterns``."""
        extra = self.config.get("mask_patterns", [])
        if not isinstance(extra, list) or not all(isinstance(p, str) for p in extra):
            raise self.error("'mask_patterns' must be a list of strings")
        return secret_patterns(extra)

    def retry(self) -> RetryPolicy:
        return RetryPolicy.from_config(self.channel_type, self.config.get("retry"))
