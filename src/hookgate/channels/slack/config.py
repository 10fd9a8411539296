"""A Slack channel's settings, read and checked from its config mapping."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookgate.channels.config import ConfigReader
from hookgate.channels.delivery import RetryPolicy

SLACK_BASE_URL = "https://slack.com/api/"


@dataclass(frozen=True, slots=True)
class SlackSettings:
    bot_token: str
    channel: str
    signing_secret: str
    base_url: str
    mask_patterns: tuple[str, ...]
    retry: RetryPolicy

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SlackSettings:
        read = ConfigReader("slack", config)
        base_url = read.base_url(SLACK_BASE_URL)
        return cls(
            bot_token=read.required("bot_token", "OAuth & Permissions → Bot User OAuth Token, "
                                    "xoxb-..."),
            channel=read.required("channel", "the channel id to post to, C..."),
            signing_secret=read.required("signing_secret", "Basic Information → Signing "
                                         "Secret"),
            base_url=base_url if base_url.endswith("/") else base_url + "/",
            mask_patterns=read.mask_patterns(),
            retry=read.retry(),
        )
