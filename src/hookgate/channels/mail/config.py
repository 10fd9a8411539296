"""An email channel's settings: the SMTP server, who gets the mails, and the links' secret."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from hookgate.channels.config import ChannelSettingsModel, parse_settings
from hookgate.channels.signed_links import MIN_SECRET_CHARS


class EmailSettings(ChannelSettingsModel):
    type: Literal["email"] = "email"
    default_base_url: ClassVar[str] = ""

    smtp_host: str = Field(description="the SMTP server's host name")
    smtp_port: int = 587
    smtp_username: str | None = None
    smtp_password: str | None = Field(default=None, repr=False)
    #: STARTTLS after connecting (port 587); ``use_tls`` for implicit TLS (port 465).
    starttls: bool = True
    use_tls: bool = False
    from_address: str = Field(description="the sender, e.g. hookgate@example.com")
    to: list[str] = Field(description="the approvers' addresses (each gets their own links)")
    link_secret: str = Field(repr=False, description="a random secret of 32+ characters that "
                                                     "signs the decision links")
    callback_url: str = Field(description="this channel's public callback URL, "
                                          "https://<host>/api/channels/<channel_id>/callback")
    #: How long a link decides: email round trips take minutes to hours.
    link_ttl_s: int = 24 * 3600

    @field_validator("to", mode="before")
    @classmethod
    def _addresses(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple) or not value or not all(
                isinstance(a, str) and "@" in a for a in value):
            raise ValueError("'to' must be a list of email addresses")
        return [a.strip().lower() for a in value]

    @field_validator("link_secret")
    @classmethod
    def _long_secret(cls, value: str) -> str:
        if len(value) < MIN_SECRET_CHARS:
            raise ValueError(f"'link_secret' must be at least {MIN_SECRET_CHARS} characters")
        return value

    @field_validator("callback_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError(f"'callback_url' must be an http(s) URL, got {value!r}")
        return value

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> EmailSettings:
        settings: EmailSettings = parse_settings(cls, "email", config)
        return settings
