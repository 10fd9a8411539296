"""A Feishu/Lark channel's settings: a pydantic model checked from its config mapping.

Without an ``encrypt_key`` the callback carries no signature anyone can check: only the
static verification token, which travels in every body. Such a channel is refused unless the
config says ``allow_unsigned: true`` on purpose.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from hookgate.channels.config import ChannelSettingsModel, parse_settings

FEISHU_BASE_URL = "https://open.feishu.cn"
LARK_BASE_URL = "https://open.larksuite.com"
RECEIVE_ID_TYPES = ("chat_id", "open_id", "union_id", "user_id", "email")


class FeishuSettings(ChannelSettingsModel):
    type: Literal["feishu"] = "feishu"
    default_base_url: ClassVar[str] = FEISHU_BASE_URL

    app_id: str = Field(description="the app's App ID, cli_...")
    app_secret: str = Field(repr=False, description="the app's App Secret")
    chat_id: str = Field(description="the group chat to post cards to, oc_...")
    verification_token: str = Field(repr=False,
        description="Events & Callbacks → Encryption strategy → Verification Token")
    encrypt_key: str | None = Field(default=None, repr=False)
    allow_unsigned: bool = False
    receive_id_type: str = "chat_id"

    @field_validator("base_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @field_validator("receive_id_type")
    @classmethod
    def _known_id_type(cls, value: str) -> str:
        if value not in RECEIVE_ID_TYPES:
            raise ValueError(f"'receive_id_type' must be one of {', '.join(RECEIVE_ID_TYPES)}, "
                             f"got {value!r}")
        return value

    @model_validator(mode="after")
    def _signed_or_said_so(self) -> FeishuSettings:
        if self.encrypt_key is None and not self.allow_unsigned:
            raise ValueError(
                "config is missing 'encrypt_key' (Events & Callbacks → Encryption strategy → "
                "Encrypt Key); without it callbacks cannot be signature-checked. Set "
                "'allow_unsigned: true' to rely on the verification token alone.")
        return self

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> FeishuSettings:
        settings: FeishuSettings = parse_settings(cls, "feishu", config)
        return settings
