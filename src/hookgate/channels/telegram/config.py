"""A Telegram channel's settings: a pydantic model checked from its config mapping.

Telegram signs nothing per update: the webhook's ``secret_token`` (set with ``setWebhook``,
sent back in ``X-Telegram-Bot-Api-Secret-Token``) is what proves an update is Telegram's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from hookgate.channels.config import ChannelSettingsModel, parse_settings

TELEGRAM_BASE_URL = "https://api.telegram.org"
#: setWebhook's secret_token: 1-256 characters of A-Z, a-z, 0-9, _ and -.
SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")
#: Shorter secret tokens are guessable; Telegram allows them, this channel does not.
MIN_SECRET_TOKEN_CHARS = 24


class TelegramSettings(ChannelSettingsModel):
    type: Literal["telegram"] = "telegram"
    default_base_url: ClassVar[str] = TELEGRAM_BASE_URL

    bot_token: str = Field(repr=False, description="the token @BotFather gave the bot, "
                                                   "123456:ABC-...")
    chat_id: str = Field(description="the chat to post to: its numeric id (-100... for a "
                                     "group) or @channelusername")
    secret_token: str = Field(repr=False, description="the secret_token given to setWebhook, "
                                                      "24-256 chars of A-Z a-z 0-9 _ -")

    @field_validator("chat_id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("secret_token")
    @classmethod
    def _webhook_secret(cls, value: str) -> str:
        if not SECRET_TOKEN.fullmatch(value):
            raise ValueError("'secret_token' may hold only A-Z, a-z, 0-9, _ and - (1-256 "
                             "chars), as setWebhook requires")
        if len(value) < MIN_SECRET_TOKEN_CHARS:
            raise ValueError(f"'secret_token' must be at least {MIN_SECRET_TOKEN_CHARS} "
                             "characters: it is the only proof an update is Telegram's")
        return value

    @field_validator("base_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> TelegramSettings:
        settings: TelegramSettings = parse_settings(cls, "telegram", config)
        return settings
