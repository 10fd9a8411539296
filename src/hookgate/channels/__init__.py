"""Chat channels: the approval card's journey through Feishu/Lark, Slack, WeCom, Telegram,
Microsoft Teams, Discord, email and ntfy.

``base`` is the interface the approval gate uses; ``registry`` builds a configured channel.
"""

from hookgate.channels.base import (
    ApprovalCard,
    CallbackAction,
    CallbackRejected,
    CallbackReply,
    CallbackRequest,
    CardOutcome,
    Channel,
    ChannelConfigError,
    ChannelError,
    DeliveredCard,
    DeliveryError,
)
from hookgate.channels.registry import CHANNEL_TYPES, create_channel, validate_channel_config

__all__ = [
    "CHANNEL_TYPES",
    "ApprovalCard",
    "CallbackAction",
    "CallbackRejected",
    "CallbackReply",
    "CallbackRequest",
    "CardOutcome",
    "Channel",
    "ChannelConfigError",
    "ChannelError",
    "DeliveredCard",
    "DeliveryError",
    "create_channel",
    "validate_channel_config",
]
