"""A WeCom channel's settings: a pydantic model checked from its config mapping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from hookgate.channels.config import ChannelSettingsModel, parse_settings
from hookgate.channels.wecom.crypto import aes_key

WECOM_BASE_URL = "https://qyapi.weixin.qq.com"


class WeComSettings(ChannelSettingsModel):
    type: Literal["wecom"] = "wecom"
    default_base_url: ClassVar[str] = WECOM_BASE_URL

    corp_id: str = Field(description="My Company → Corp ID, ww...")
    corp_secret: str = Field(repr=False, description="the app's Secret")
    agent_id: int = Field(description="the app's AgentId, e.g. 1000002")
    token: str = Field(repr=False, description="the app's API receive settings → Token")
    encoding_aes_key: str = Field(repr=False, description="the app's API receive settings → "
                                              "EncodingAESKey")
    touser: str = Field(description="who gets the cards: user ids joined by '|', or @all")

    @field_validator("agent_id", mode="before")
    @classmethod
    def _digits(cls, value: Any) -> Any:
        return int(value) if isinstance(value, str) and value.isdigit() else value

    @field_validator("encoding_aes_key")
    @classmethod
    def _valid_aes_key(cls, value: str) -> str:
        try:
            aes_key(value)
        except ValueError as exc:
            raise ValueError(f"'encoding_aes_key' is not a valid EncodingAESKey: {exc}"
                             ) from None
        return value

    @field_validator("base_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> WeComSettings:
        settings: WeComSettings = parse_settings(cls, "wecom", config)
        return settings
