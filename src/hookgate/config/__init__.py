"""The configuration file (SPEC §6): load it, check it, and build agents and models from it."""

from hookgate.channels.validators import (
    BUILTIN_CHANNEL_TYPES,
    ChannelValidator,
    channel_types,
    register_channel_validator,
    unregister_channel_validator,
)
from hookgate.config.errors import ConfigError
from hookgate.config.loader import load_config, parse_config
from hookgate.config.schema import (
    AgentSpec,
    ChannelSpec,
    ChatIdentities,
    HookgateConfig,
    ModelSpec,
    OpenAIModelSpec,
    OrgSpec,
    ScriptedModelSpec,
    ServerSpec,
    UserSpec,
)

__all__ = [
    "BUILTIN_CHANNEL_TYPES",
    "AgentSpec",
    "ChannelSpec",
    "ChannelValidator",
    "ChatIdentities",
    "ConfigError",
    "HookgateConfig",
    "ModelSpec",
    "OpenAIModelSpec",
    "OrgSpec",
    "ScriptedModelSpec",
    "ServerSpec",
    "UserSpec",
    "channel_types",
    "load_config",
    "parse_config",
    "register_channel_validator",
    "unregister_channel_validator",
]
