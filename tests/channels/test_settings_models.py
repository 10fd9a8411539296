"""Channel settings are pydantic models chosen by the channel's type, with errors naming
the setting and secrets kept out of their printed form."""

from __future__ import annotations

import pytest

from hookgate.channels import ChannelConfigError
from hookgate.channels.feishu.config import FeishuSettings
from hookgate.channels.registry import channel_settings
from hookgate.channels.slack.config import SlackSettings
from hookgate.channels.wecom.config import WeComSettings

SLACK = {"bot_token": "xoxb-secret", "channel": "C1", "signing_secret": "shh"}


def test_the_type_picks_the_model_and_defaults_are_filled_in() -> None:
    slack = channel_settings("slack", SLACK)
    assert isinstance(slack, SlackSettings) and slack.base_url == "https://slack.com/api/"
    assert "password" in slack.mask_patterns and slack.retry.max_attempts == 5
    wecom = channel_settings("wecom", {"corp_id": "ww1", "corp_secret": "s", "agent_id": "7",
                                       "token": "t", "encoding_aes_key": "a" * 43,
                                       "touser": "@all"})
    assert isinstance(wecom, WeComSettings) and wecom.agent_id == 7
    assert "xoxb-secret" not in repr(slack) and "shh" not in repr(slack)


@pytest.mark.parametrize(("config", "said"), [
    ({**SLACK, "channel": 5}, "slack channel: 'channel' must be a string, got int"),
    ({**SLACK, "channel": "  "}, "slack channel: config is missing 'channel' (the channel id"),
    ({**SLACK, "base_url": "ftp://x"}, "slack channel: 'base_url' must be an http(s) URL"),
    ({**SLACK, "retry": {"max_attempts": -1}}, "slack channel: retry.max_attempts must be"),
])
def test_each_error_names_the_setting(config: dict[str, object], said: str) -> None:
    with pytest.raises(ChannelConfigError) as refused:
        channel_settings("slack", config)
    assert str(refused.value).startswith(said)


def test_a_feishu_flag_is_a_boolean_not_a_word() -> None:
    config = {"app_id": "cli_1", "app_secret": "s", "chat_id": "oc_1",
              "verification_token": "v", "allow_unsigned": "yes"}
    with pytest.raises(ChannelConfigError, match="'allow_unsigned' must be true or false"):
        FeishuSettings.from_config(config)
    assert FeishuSettings.from_config({**config, "allow_unsigned": True}).encrypt_key is None
