"""Building channels by type name, and checking a config before it is saved."""

from __future__ import annotations

import pytest

from hookgate.channels.base import ChannelConfigError
from hookgate.channels.feishu.channel import FeishuChannel
from hookgate.channels.registry import CHANNEL_TYPES, create_channel, validate_channel_config

FEISHU = {"app_id": "cli_1", "app_secret": "s", "chat_id": "oc_1",
          "verification_token": "v", "encrypt_key": "e"}


async def test_create_channel_builds_the_named_type_with_its_ids() -> None:
    channel = create_channel("ch-9", "feishu", "org-3", dict(FEISHU))
    try:
        assert isinstance(channel, FeishuChannel)
        assert (channel.id, channel.org_id, channel.type) == ("ch-9", "org-3", "feishu")
    finally:
        await channel.aclose()


def test_every_type_names_its_first_missing_setting() -> None:
    for channel_type in CHANNEL_TYPES:
        with pytest.raises(ChannelConfigError, match=f"^{channel_type} channel: config is "
                                                     "missing '"):
            validate_channel_config(channel_type, {})


def test_every_type_names_its_own_channel_class_and_settings_model() -> None:
    # The registry names modules as strings: each one must import and be the type's own.
    from hookgate.channels.base import Channel
    from hookgate.channels.config import ChannelSettingsModel
    from hookgate.channels.registry import SETTINGS_MODELS
    from hookgate.channels.validators import BUILTIN_CHANNEL_TYPES

    assert sorted(CHANNEL_TYPES) == sorted(SETTINGS_MODELS) == sorted(BUILTIN_CHANNEL_TYPES)
    for channel_type in CHANNEL_TYPES:
        cls, model = CHANNEL_TYPES[channel_type], SETTINGS_MODELS[channel_type]
        assert issubclass(cls, Channel) and cls.type == channel_type
        assert issubclass(model, ChannelSettingsModel)
        assert model.model_fields["type"].annotation is not str  # its own Literal tag
    assert "matrix" not in CHANNEL_TYPES


def test_an_unknown_type_is_a_config_error_listing_the_known_ones() -> None:
    with pytest.raises(ChannelConfigError, match=r"unknown channel type 'matrix'.*feishu"):
        validate_channel_config("matrix", {})
    with pytest.raises(ChannelConfigError):
        create_channel("c", "matrix", "o", {})


def test_bad_retry_and_mask_settings_are_config_errors() -> None:
    with pytest.raises(ChannelConfigError, match=r"retry\.max_attempts"):
        validate_channel_config("feishu", {**FEISHU, "retry": {"max_attempts": 0}})
    with pytest.raises(ChannelConfigError, match="unknown retry setting"):
        validate_channel_config("feishu", {**FEISHU, "retry": {"tries": 3}})
    with pytest.raises(ChannelConfigError, match="mask_patterns"):
        validate_channel_config("feishu", {**FEISHU, "mask_patterns": "iban"})


def test_the_configuration_loader_refuses_a_channel_missing_a_secret() -> None:
    from hookgate.config import ConfigError, parse_config

    text = """
orgs: [{id: acme, name: ACME}]
channels:
  - id: ops
    type: slack
    org: acme
    config: {bot_token: xoxb-1, channel: C1}
"""
    with pytest.raises(ConfigError, match=r"channels\[0\]\.config.*'signing_secret'"):
        parse_config(text, source="hookgate.yaml")
