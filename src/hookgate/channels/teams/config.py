"""A Microsoft Teams channel's settings: a pydantic model checked from its config mapping.

The bot posts through the Bot Connector service at ``base_url`` (the conversation's
``serviceUrl``) with a token from Microsoft Entra ID (``login_url``); the Connector's requests
to the bot carry a JWT checked against the keys its OpenID metadata publishes.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from hookgate.channels.config import ChannelSettingsModel, parse_settings

#: Where the Bot Connector serves Teams conversations (a conversation's serviceUrl may name
#: a regional one, e.g. https://smba.trafficmanager.net/emea/).
TEAMS_SERVICE_URL = "https://smba.trafficmanager.net/teams/"
OPENID_METADATA_URL = "https://login.botframework.com/v1/.well-known/openidconfiguration"
LOGIN_URL = "https://login.microsoftonline.com"
#: The issuer of the Bot Connector's tokens to bots.
CONNECTOR_ISSUER = "https://api.botframework.com"


class TeamsSettings(ChannelSettingsModel):
    type: Literal["teams"] = "teams"
    default_base_url: ClassVar[str] = TEAMS_SERVICE_URL

    app_id: str = Field(description="the bot's Microsoft App ID (Azure Bot → Configuration)")
    app_password: str = Field(repr=False, description="a client secret of the bot's app "
                                                      "registration")
    conversation_id: str = Field(description="the Teams channel's conversation id, "
                                             "19:...@thread.tacv2")
    #: The app's tenant for a single-tenant bot; ``botframework.com`` for a multi-tenant one.
    tenant_id: str = "botframework.com"
    openid_metadata_url: str = OPENID_METADATA_URL
    login_url: str = LOGIN_URL
    issuer: str = CONNECTOR_ISSUER

    @field_validator("base_url")
    @classmethod
    def _trailing_slash(cls, value: str) -> str:
        return value if value.endswith("/") else value + "/"

    @field_validator("login_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @model_validator(mode="after")
    def _jwt_library_installed(self) -> TeamsSettings:
        if importlib.util.find_spec("jwt") is None:
            raise ValueError("a teams channel checks the Bot Connector's tokens with PyJWT, "
                             "which is not installed: pip install 'hookgate[teams]'")
        return self

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> TeamsSettings:
        settings: TeamsSettings = parse_settings(cls, "teams", config)
        return settings
