"""The channel types by name: build a configured channel, or check a config before saving it.

Importing this module also registers each type's check with the configuration loader, so
``hookgate check`` refuses a channel whose secrets are missing before a server starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, TypeAdapter

from hookgate.channels.base import Channel, ChannelConfigError
from hookgate.channels.config import ChannelSettingsModel, parse_settings
from hookgate.channels.discord.channel import DiscordChannel
from hookgate.channels.discord.config import DiscordSettings
from hookgate.channels.feishu.channel import FeishuChannel
from hookgate.channels.feishu.config import FeishuSettings
from hookgate.channels.mail.channel import EmailChannel
from hookgate.channels.mail.config import EmailSettings
from hookgate.channels.ntfy.channel import NtfyChannel
from hookgate.channels.ntfy.config import NtfySettings
from hookgate.channels.slack.channel import SlackChannel
from hookgate.channels.slack.config import SlackSettings
from hookgate.channels.teams.channel import TeamsChannel
from hookgate.channels.teams.config import TeamsSettings
from hookgate.channels.telegram.channel import TelegramChannel
from hookgate.channels.telegram.config import TelegramSettings
from hookgate.channels.validators import ChannelValidator, register_channel_validator
from hookgate.channels.wecom.channel import WeComChannel
from hookgate.channels.wecom.config import WeComSettings

ChannelClass = (type[FeishuChannel] | type[SlackChannel] | type[WeComChannel]
                | type[TelegramChannel] | type[TeamsChannel] | type[DiscordChannel]
                | type[EmailChannel] | type[NtfyChannel])

CHANNEL_TYPES: dict[str, ChannelClass] = {
    "feishu": FeishuChannel,  # Lark too: base_url https://open.larksuite.com
    "slack": SlackChannel,
    "wecom": WeComChannel,
    "telegram": TelegramChannel,
    "teams": TeamsChannel,
    "discord": DiscordChannel,
    "email": EmailChannel,
    "ntfy": NtfyChannel,
}


#: A built-in channel's settings, keyed by its ``type``.
ChannelSettings = Annotated[FeishuSettings | SlackSettings | WeComSettings | TelegramSettings
                            | TeamsSettings | DiscordSettings | EmailSettings | NtfySettings,
                            Field(discriminator="type")]
_SETTINGS: TypeAdapter[ChannelSettings] = TypeAdapter(ChannelSettings)
SETTINGS_MODELS: dict[str, type[ChannelSettingsModel]] = {
    "feishu": FeishuSettings, "slack": SlackSettings, "wecom": WeComSettings,
    "telegram": TelegramSettings, "teams": TeamsSettings, "discord": DiscordSettings,
    "email": EmailSettings, "ntfy": NtfySettings}


def channel_settings(channel_type: str, config: Mapping[str, Any]) -> ChannelSettings:
    """The typed settings of a ``channel_type`` channel with ``config``; ChannelConfigError
    naming the first missing or unusable setting."""
    _channel_class(channel_type)
    settings: ChannelSettings = parse_settings(SETTINGS_MODELS[channel_type], channel_type,
                                               config, _SETTINGS)
    return settings


def _channel_class(channel_type: str) -> ChannelClass:
    try:
        return CHANNEL_TYPES[channel_type]
    except KeyError:
        known = ", ".join(sorted(CHANNEL_TYPES))
        raise ChannelConfigError(
            f"unknown channel type {channel_type!r} (known: {known})"
        ) from None


def validate_channel_config(channel_type: str, config: Mapping[str, Any]) -> None:
    """Raise ChannelConfigError naming the first missing or unusable setting."""
    channel_settings(channel_type, config)


def create_channel(
    channel_id: str, channel_type: str, org_id: str, config: dict[str, Any]
) -> Channel:
    """A ready channel (validates its config first; opens no connection yet)."""
    return _channel_class(channel_type)(channel_id, org_id, config)


def _loader_check(channel_type: str) -> ChannelValidator:
    def check(config: dict[str, Any]) -> None:
        try:
            validate_channel_config(channel_type, config)
        except ChannelConfigError as exc:  # the loader already says which channel it is
            raise ValueError(str(exc).removeprefix(f"{channel_type} channel: ")) from None

    return check


for _type in CHANNEL_TYPES:
    register_channel_validator(_type, _loader_check(_type))
