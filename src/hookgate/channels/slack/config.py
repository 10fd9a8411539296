"""A Slack channel's settings: a pydantic model checked from its config mapping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from hookgate.channels.config import ChannelSettingsModel, parse_settings

SLACK_BASE_URL = "https://slack.com/api/"


class SlackSettings(ChannelSettingsModel):
    type: Literal["slack"] = "slack"
    default_base_url: ClassVar[str] = SLACK_BASE_URL

    bot_token: str = Field(repr=False, description="OAuth & Permissions → Bot User OAuth "
                                                   "Token, xoxb-...")
    channel: str = Field(description="the channel id to post to, C...")
    signing_secret: str = Field(repr=False, description="Basic Information → Signing Secret")

    @field_validator("base_url")
    @classmethod
    def _trailing_slash(cls, value: str) -> str:
        return value if value.endswith("/") else value + "/"

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SlackSettings:
        settings: SlackSettings = parse_settings(cls, "slack", config)
        return settings
