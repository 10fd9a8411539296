"""The configuration of OpenID Connect sign-in (``oidc:``): the identity provider, this
client, and how its claims map to a hookgate user's org, admin right and approver groups.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Name = Annotated[str, Field(min_length=1)]

#: Schemes an issuer or redirect URL may use: https, or plain http on loopback only.
_LOOPBACK_HTTP = ("http://127.0.0.1", "http://localhost", "http://[::1]")


def _https_or_loopback(value: str) -> str:
    if not value.startswith(("https://", *_LOOPBACK_HTTP)):
        raise ValueError(f"'{value}' must be an https:// URL (http only on loopback)")
    return value


class OidcSpec(BaseModel):
    """``oidc:``: people sign in to the inbox and the CLI with an OpenID Connect provider."""

    model_config = ConfigDict(extra="forbid")

    #: The provider's issuer identifier; discovery reads ``<issuer>/.well-known/...``.
    issuer: Name
    client_id: Name
    #: The client secret (``${VAR}`` reads it from the environment); None: a public client
    #: (PKCE alone, as the CLI always is).
    client_secret: Name | None = None
    scopes: list[Name] = Field(default_factory=lambda: ["openid", "profile", "email"])
    #: The claim naming the person's hookgate org; None: everyone signs in to ``org``.
    org_claim: Name | None = None
    #: The org of people whose token has no ``org_claim`` (or when there is none).
    org: Name | None = None
    #: The claim holding the person's groups (a list of strings, or one string).
    groups_claim: Name = "groups"
    #: Groups whose members are admins of their org.
    admin_groups: list[Name] = Field(default_factory=list)
    #: Groups whose members may sign in and decide; empty: every person the provider
    #: signs in. Someone in none of them is refused at sign-in and at every re-check.
    approver_groups: list[Name] = Field(default_factory=list)
    #: How often a session is checked again at the provider (a refresh); the time of the
    #: last check is kept in the database, so every instance ends it within this time.
    access_recheck_s: float = Field(60.0, gt=0, le=3600)
    #: How long a session lasts at most, whatever the provider says.
    session_ttl_s: float = Field(8 * 3600.0, gt=0, le=30 * 86_400)
    #: False: a person's hookgate API token no longer signs in (service identities keep
    #: theirs); people then sign in only through the provider.
    tokens_for_people: bool = True
    #: Where the provider sends the browser back; default ``<server.public_url>/auth/callback``.
    redirect_url: Name | None = None
    #: The session cookie's ``Secure`` flag: off only for http://127.0.0.1 tests.
    cookie_secure: bool = True
    #: Extra parameters of the authorization request a provider needs (Google's
    #: ``access_type: offline`` for a refresh token); never state, nonce or PKCE's.
    authorize_params: dict[Name, str] = Field(default_factory=dict)

    @field_validator("authorize_params")
    @classmethod
    def _own_params(cls, value: dict[str, str]) -> dict[str, str]:
        owned = {"state", "nonce", "code_challenge", "code_challenge_method", "client_id",
                 "redirect_uri", "response_type", "scope"}
        taken = sorted(owned & set(value))
        if taken:
            raise ValueError(f"authorize_params may not set {', '.join(taken)}: hookgate "
                             "sets them")
        return value

    @field_validator("issuer")
    @classmethod
    def _issuer_url(cls, value: str) -> str:
        return _https_or_loopback(value).rstrip("/")

    @field_validator("redirect_url")
    @classmethod
    def _redirect(cls, value: str | None) -> str | None:
        return None if value is None else _https_or_loopback(value)

    @field_validator("scopes")
    @classmethod
    def _openid_scope(cls, value: list[str]) -> list[str]:
        if "openid" not in value:
            raise ValueError("scopes must include 'openid'")
        return value

    @model_validator(mode="after")
    def _some_org(self) -> OidcSpec:
        if self.org_claim is None and self.org is None:
            raise ValueError("oidc needs org_claim or org: the org people sign in to")
        return self
