"""A Feishu/Lark channel's settings, read and checked from its config mapping.

Without an ``encrypt_key`` the callback carries no signature anyone can check: only the
static verification token, which travels in every body. Such a channel is refused unless the
config says ``allow_unsigned: true`` on purpose.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookgate.channels.config import ConfigReader
from hookgate.channels.delivery import RetryPolicy

FEISHU_BASE_URL = "https://open.feishu.cn"
LARK_BASE_URL = "https://open.larksuite.com"
RECEIVE_ID_TYPES = ("chat_id", "open_id", "union_id", "user_id", "email")


@dataclass(frozen=True, slots=True)
class FeishuSettings:
    app_id: str
    app_secret: str
    chat_id: str
    verification_token: str
    encrypt_key: str | None
    allow_unsigned: bool
    base_url: str
    receive_id_type: str
    mask_patterns: tuple[str, ...]
    retry: RetryPolicy

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> FeishuSettings:
        read = ConfigReader("feishu", config)
        settings = cls(
            app_id=read.required("app_id", "the app's App ID, cli_..."),
            app_secret=read.required("app_secret", "the app's App Secret"),
            chat_id=read.required("chat_id", "the group chat to post cards to, oc_..."),
            verification_token=read.required(
                "verification_token",
                "Events & Callbacks → Encryption strategy → Verification Token",
            ),
            encrypt_key=read.optional("encrypt_key"),
            allow_unsigned=read.flag("allow_unsigned"),
            base_url=read.base_url(FEISHU_BASE_URL).rstrip("/"),
            receive_id_type=read.optional("receive_id_type", "chat_id") or "chat_id",
            mask_patterns=read.mask_patterns(),
            retry=read.retry(),
        )
        if settings.encrypt_key is None and not settings.allow_unsigned:
            raise read.error(
                "config is missing 'encrypt_key' (Events & Callbacks → Encryption strategy → "
                "Encrypt Key); without it callbacks cannot be signature-checked. Set "
                "'allow_unsigned: true' to rely on the verification token alone."
            )
        if settings.receive_id_type not in RECEIVE_ID_TYPES:
            raise read.error(
                f"'receive_id_type' must be one of {', '.join(RECEIVE_ID_TYPES)}, "
                f"got {settings.receive_id_type!r}"
            )
        return settings
