"""A Discord channel's settings: a pydantic model checked from its config mapping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from hookgate.channels.config import ChannelSettingsModel, parse_settings

DISCORD_BASE_URL = "https://discord.com/api/v10"


class DiscordSettings(ChannelSettingsModel):
    type: Literal["discord"] = "discord"
    default_base_url: ClassVar[str] = DISCORD_BASE_URL

    application_id: str = Field(description="General Information → Application ID")
    public_key: str = Field(description="General Information → Public Key (64 hex digits)")
    bot_token: str = Field(repr=False, description="Bot → Token")
    channel_id: str = Field(description="the text channel to post to (Copy Channel ID)")

    @field_validator("public_key")
    @classmethod
    def _ed25519_key(cls, value: str) -> str:
        try:
            key = bytes.fromhex(value)
        except ValueError:
            key = b""
        if len(key) != 32:
            raise ValueError("'public_key' must be the application's Ed25519 public key: "
                             "64 hex digits")
        return value.lower()

    @field_validator("base_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> DiscordSettings:
        settings: DiscordSettings = parse_settings(cls, "discord", config)
        return settings
