"""The channel types by name: build a configured channel, or check a config before saving it.

Importing this module also registers each type's check with the configuration loader, so
``hookgate check`` refuses a channel whose secrets are missing before a server starts. A
type's settings model is imported when a channel of the type is checked, its channel class
when one is built: reading a configuration loads no platform's client code.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from hookgate.channels.base import Channel, ChannelConfigError
from hookgate.channels.config import ChannelSettingsModel, parse_settings
from hookgate.channels.validators import ChannelValidator, register_channel_validator

if TYPE_CHECKING:
    from hookgate.channels.discord.config import DiscordSettings
    from hookgate.channels.feishu.config import FeishuSettings
    from hookgate.channels.mail.config import EmailSettings
    from hookgate.channels.ntfy.config import NtfySettings
    from hookgate.channels.slack.config import SlackSettings
    from hookgate.channels.teams.config import TeamsSettings
    from hookgate.channels.telegram.config import TelegramSettings
    from hookgate.channels.wecom.config import WeComSettings

    #: A built-in channel's settings, keyed by its ``type``.
    ChannelSettings = (FeishuSettings | SlackSettings | WeComSettings | TelegramSettings
                       | TeamsSettings | DiscordSettings | EmailSettings | NtfySettings)

_T = TypeVar("_T")

#: Each built-in type's package under hookgate.channels, its channel class (in ``channel``)
#: and its settings model (in ``config``). Imported when a channel of the type is checked or
#: built, not before: a platform's client libraries cost every process that starts.
_BUILTIN: dict[str, tuple[str, str, str]] = {
    # Lark too: base_url https://open.larksuite.com
    "feishu": ("feishu", "FeishuChannel", "FeishuSettings"),
    "slack": ("slack", "SlackChannel", "SlackSettings"),
    "wecom": ("wecom", "WeComChannel", "WeComSettings"),
    "telegram": ("telegram", "TelegramChannel", "TelegramSettings"),
    "teams": ("teams", "TeamsChannel", "TeamsSettings"),
    "discord": ("discord", "DiscordChannel", "DiscordSettings"),
    "email": ("mail", "EmailChannel", "EmailSettings"),
    "ntfy": ("ntfy", "NtfyChannel", "NtfySettings"),
}


class _ImportedOnUse(Mapping[str, _T]):
    """One attribute of each built-in type's ``module`` (a ``channel`` or ``config`` module
    of its package) by type name, imported on first lookup."""

    def __init__(self, module: str, index: int) -> None:
        self._module, self._index = module, index

    def __getitem__(self, channel_type: str) -> _T:
        if channel_type not in _BUILTIN:
            raise KeyError(channel_type)
        package, *names = _BUILTIN[channel_type]
        found: _T = getattr(
            importlib.import_module(f"hookgate.channels.{package}.{self._module}"),
            names[self._index])
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(_BUILTIN)

    def __len__(self) -> int:
        return len(_BUILTIN)


CHANNEL_TYPES: Mapping[str, type[Channel]] = _ImportedOnUse("channel", 0)
SETTINGS_MODELS: Mapping[str, type[ChannelSettingsModel]] = _ImportedOnUse("config", 1)


def channel_settings(channel_type: str, config: Mapping[str, Any]) -> ChannelSettings:
    """The typed settings of a ``channel_type`` channel with ``config``; ChannelConfigError
    naming the first missing or unusable setting."""
    settings: ChannelSettings = parse_settings(_settings_model(channel_type), channel_type,
                                               config)
    return settings


def _known(channel_type: str) -> None:
    if channel_type not in _BUILTIN:
        known = ", ".join(sorted(_BUILTIN))
        raise ChannelConfigError(f"unknown channel type {channel_type!r} (known: {known})")


def _settings_model(channel_type: str) -> type[ChannelSettingsModel]:
    _known(channel_type)
    return SETTINGS_MODELS[channel_type]


def _channel_class(channel_type: str) -> type[Channel]:
    _known(channel_type)
    return CHANNEL_TYPES[channel_type]


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
