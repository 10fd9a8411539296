"""Checking the Bot Connector's JWT on a request to the bot, with PyJWT.

Per Microsoft's "Authentication with the Bot Connector API": the token is RS256-signed by a
key the Connector's OpenID metadata publishes (the key must endorse the activity's
``channelId``), its issuer is https://api.botframework.com, its audience the bot's App ID,
it has not expired (5 minutes of clock skew allowed), and its ``serviceUrl`` claim equals the
activity's. The keys are fetched ahead (async, `refresh`) and checked here without I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx

from hookgate.channels.base import CallbackRejected

LEEWAY_S = 300
#: Keys are fetched again after a day, and at most once a minute for an unknown key id.
KEYS_TTL_S = 24 * 3600.0
UNKNOWN_KID_REFETCH_S = 60.0


class KeysUnavailable(Exception):
    """The OpenID metadata or its key set could not be fetched."""


@dataclass(frozen=True, slots=True)
class ConnectorClaims:
    service_url: str
    claims: dict[str, Any]


@dataclass
class ConnectorKeys:
    """The Connector's published signing keys: {kid: (jwk, endorsements)}."""

    metadata_url: str
    keys: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = field(default_factory=dict)
    fetched_at: float = 0.0
    last_attempt: float = 0.0

    def needs_refresh(self, kid: str | None, now: float) -> bool:
        if now - self.fetched_at > KEYS_TTL_S:
            return now - self.last_attempt > 1.0 or not self.keys
        return kid is not None and kid not in self.keys and (
            now - self.last_attempt > UNKNOWN_KID_REFETCH_S)

    async def refresh(self, client: httpx.AsyncClient, now: float) -> None:
        """Fetch the metadata, then its ``jwks_uri``; KeysUnavailable when either fails."""
        self.last_attempt = now
        try:
            metadata = (await client.get(self.metadata_url)).raise_for_status().json()
            jwks = (await client.get(str(metadata["jwks_uri"]))).raise_for_status().json()
            keys = {}
            for key in jwks["keys"]:
                if isinstance(key, dict) and isinstance(key.get("kid"), str):
                    endorsements = key.get("endorsements")
                    keys[key["kid"]] = (key, tuple(e for e in endorsements or ()
                                                   if isinstance(e, str)))
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise KeysUnavailable(f"teams: the Bot Connector's signing keys could not be "
                                  f"fetched from {self.metadata_url}: {exc}") from None
        self.keys, self.fetched_at = keys, now


def bearer_token(headers: dict[str, str]) -> str:
    value = headers.get("authorization", "")
    if not value.startswith("Bearer ") or not value[7:].strip():
        raise CallbackRejected(401, "request without 'Authorization: Bearer <JWT>'")
    return value[7:].strip()


def token_kid(token: str) -> str | None:
    """The key id in the token's header (None when the header cannot be read)."""
    import jwt

    try:
        kid = jwt.get_unverified_header(token).get("kid")
    except jwt.PyJWTError:
        return None
    return kid if isinstance(kid, str) else None


def verify(token: str, keys: ConnectorKeys, *, app_id: str, issuer: str,
           channel_id: str | None, service_url: str | None) -> ConnectorClaims:
    """The token's claims once every check passes; CallbackRejected(401) naming the first
    that fails."""
    import jwt

    kid = token_kid(token)
    if kid is None or kid not in keys.keys:
        raise CallbackRejected(401, "Bot Connector token signed by an unknown key")
    jwk, endorsements = keys.keys[kid]
    if channel_id is None or channel_id not in endorsements:
        raise CallbackRejected(401, f"the signing key does not endorse channel {channel_id!r}")
    try:
        key = jwt.PyJWK.from_json(json.dumps(jwk), algorithm="RS256")
        claims: dict[str, Any] = jwt.decode(
            token, key.key, algorithms=["RS256"], audience=app_id, issuer=issuer,
            leeway=LEEWAY_S, options={"require": ["exp", "iss", "aud"]})
    except jwt.ExpiredSignatureError:
        raise CallbackRejected(401, "Bot Connector token expired") from None
    except jwt.InvalidAudienceError:
        raise CallbackRejected(401, "Bot Connector token is for another app id") from None
    except jwt.InvalidIssuerError:
        raise CallbackRejected(401, "Bot Connector token from another issuer") from None
    except jwt.PyJWTError as exc:
        raise CallbackRejected(401, f"Bot Connector token refused: {exc}") from None
    claimed = claims.get("serviceUrl") or claims.get("serviceurl")
    if not isinstance(claimed, str) or service_url is None or claimed != service_url:
        raise CallbackRejected(401, "the token's serviceUrl claim does not match the "
                                    "activity's serviceUrl")
    return ConnectorClaims(claimed, claims)
