"""An ntfy channel's settings: the server, one topic per approver, and the tokens' secret."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from hookgate.channels.config import ChannelSettingsModel, parse_settings
from hookgate.channels.signed_links import MIN_SECRET_CHARS

NTFY_BASE_URL = "https://ntfy.sh"
TOPIC = re.compile(r"[-_A-Za-z0-9]{1,64}")


class NtfySettings(ChannelSettingsModel):
    type: Literal["ntfy"] = "ntfy"
    default_base_url: ClassVar[str] = NTFY_BASE_URL

    #: Each approver's own topic (a topic is readable by whoever knows its name: make them
    #: long and random, or protect them with access control on your server).
    topics: list[str] = Field(description="the approvers' topics, one each")
    access_token: str | None = Field(default=None, repr=False)
    link_secret: str = Field(repr=False, description="a random secret of 32+ characters that "
                                                     "signs the buttons' tokens")
    callback_url: str = Field(description="this channel's public callback URL, "
                                          "https://<host>/api/channels/<channel_id>/callback")
    #: How long a button decides.
    token_ttl_s: int = 15 * 60

    @field_validator("topics", mode="before")
    @classmethod
    def _topics(cls, value: Any) -> Any:
        if not isinstance(value, list | tuple) or not value or not all(
                isinstance(t, str) and TOPIC.fullmatch(t) for t in value):
            raise ValueError("'topics' must be a list of ntfy topic names "
                             "(1-64 of A-Z a-z 0-9 _ -)")
        return list(value)

    @field_validator("link_secret")
    @classmethod
    def _long_secret(cls, value: str) -> str:
        if len(value) < MIN_SECRET_CHARS:
            raise ValueError(f"'link_secret' must be at least {MIN_SECRET_CHARS} characters")
        return value

    @field_validator("base_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> NtfySettings:
        settings: NtfySettings = parse_settings(cls, "ntfy", config)
        return settings
