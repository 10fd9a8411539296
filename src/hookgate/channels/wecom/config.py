"""A WeCom channel's settings, read and checked from its config mapping."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookgate.channels.config import ConfigReader
from hookgate.channels.delivery import RetryPolicy
from hookgate.channels.wecom.crypto import aes_key

WECOM_BASE_URL = "https://qyapi.weixin.qq.com"


@dataclass(frozen=True, slots=True)
class WeComSettings:
    corp_id: str
    corp_secret: str
    agent_id: int
    token: str
    encoding_aes_key: str
    touser: str
    base_url: str
    mask_patterns: tuple[str, ...]
    retry: RetryPolicy

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> WeComSettings:
        read = ConfigReader("wecom", config)
        corp_id = read.required("corp_id", "My Company → Corp ID, ww...")
        corp_secret = read.required("corp_secret", "the app's Secret")
        agent_id = _agent_id(read)
        token = read.required("token", "the app's API receive settings → Token")
        encoding_aes_key = read.required(
            "encoding_aes_key", "the app's API receive settings → EncodingAESKey"
        )
        try:
            aes_key(encoding_aes_key)
        except ValueError as exc:
            raise read.error(f"'encoding_aes_key' is not a valid EncodingAESKey: {exc}") from None
        touser = read.required("touser", "who gets the cards: user ids joined by '|', or @all")
        return cls(
            corp_id=corp_id,
            corp_secret=corp_secret,
            agent_id=agent_id,
            token=token,
            encoding_aes_key=encoding_aes_key,
            touser=touser,
            base_url=read.base_url(WECOM_BASE_URL).rstrip("/"),
            mask_patterns=read.mask_patterns(),
            retry=read.retry(),
        )


def _agent_id(read: ConfigReader) -> int:
    value = read.config.get("agent_id")
    if value is None or value == "":
        raise read.error("config is missing 'agent_id' (the app's AgentId, e.g. 1000002)")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise read.error(f"'agent_id' must be a number, got {value!r}")
