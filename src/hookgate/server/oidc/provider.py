"""The OpenID Connect provider as this server's client sees it: discovery, the authorization
URL (state, nonce, PKCE S256), the code and refresh grants (Authlib), and the ID token's
check (joserfc): signature by the provider's JWKS (fetched again for an unknown key id),
issuer, audience, expiry with 60 s leeway, nonce; ``alg: none`` and HMAC never accepted.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass
from typing import Any

import httpx
from authlib.common.security import generate_token
from authlib.integrations.base_client import OAuthError
from authlib.integrations.httpx_client import AsyncOAuth2Client
from authlib.oauth2.rfc6749.errors import OAuth2Error
from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from hookgate.config.oidc import OidcSpec
from hookgate.server.oidc.errors import OidcError
from hookgate.tls import client_context

__all__ = ["OidcError", "Provider"]

#: Clock skew accepted on ``exp``, ``iat`` and ``nbf``.
LEEWAY_S = 60
#: Signature algorithms an ID token may use: asymmetric only (never ``none``, never HMAC
#: with the client secret).
ASYMMETRIC_ALGS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
                   "ES512", "EdDSA")
_TIMEOUT_S = 10.0
#: The event a back-channel logout token carries.
BACKCHANNEL_EVENT = "http://schemas.openid.net/event/backchannel-logout"
#: How old a logout token may be (a replayed old one ends no later session).
LOGOUT_MAX_AGE_S = 300


@dataclass(frozen=True, slots=True)
class Metadata:
    """What discovery says of the provider."""

    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str | None
    end_session_endpoint: str | None
    device_authorization_endpoint: str | None
    algorithms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Authorization:
    """A sign-in started: where to send the browser, and what the callback must match."""

    url: str
    state: str
    nonce: str
    code_verifier: str


class Provider:
    """One provider (``oidc:``), for one redirect URL."""

    #: The keys are fetched again for an unknown key id at most this often: a flood of
    #: tokens naming made-up key ids (the back-channel logout route takes any) costs the
    #: provider one fetch per interval, not one each.
    jwks_refetch_min_s = 10.0

    def __init__(self, spec: OidcSpec, redirect_url: str | None) -> None:
        self.spec = spec
        self.redirect_url = redirect_url
        self._metadata: Metadata | None = None
        self._keys: KeySet | None = None
        self._fetched_at = 0.0
        self._lock = asyncio.Lock()

    # -- discovery and keys --------------------------------------------------------------------

    async def metadata(self) -> Metadata:
        if self._metadata is None:
            url = f"{self.spec.issuer}/.well-known/openid-configuration"
            doc = await _get_json(url, "discovery")
            if str(doc.get("issuer", "")).rstrip("/") != self.spec.issuer:
                raise OidcError(f"discovery at {url} names issuer {doc.get('issuer')!r}, "
                                f"not the configured {self.spec.issuer!r}")
            try:
                algs = tuple(a for a in doc.get("id_token_signing_alg_values_supported",
                                                ["RS256"]) if a in ASYMMETRIC_ALGS)
                self._metadata = Metadata(
                    str(doc["authorization_endpoint"]), str(doc["token_endpoint"]),
                    str(doc["jwks_uri"]), doc.get("userinfo_endpoint"),
                    doc.get("end_session_endpoint"),
                    doc.get("device_authorization_endpoint"), algs or ("RS256",))
            except KeyError as exc:
                raise OidcError(f"discovery at {url} lacks {exc}") from exc
        return self._metadata

    async def _key_set(self, kid: str | None) -> KeySet:
        """The provider's keys; fetched again when ``kid`` is not among them (rotation)."""
        async with self._lock:
            unknown = kid is not None and self._keys is not None and not _has_kid(
                self._keys, kid)
            if self._keys is None or (unknown and time.monotonic() - self._fetched_at
                                      >= self.jwks_refetch_min_s):
                doc = await _get_json((await self.metadata()).jwks_uri, "the JWKS")
                self._fetched_at = time.monotonic()
                try:
                    self._keys = KeySet.import_key_set(doc)  # type: ignore[arg-type]
                except (JoseError, ValueError, TypeError, KeyError) as exc:
                    raise OidcError(f"the provider's JWKS is not usable: {exc}") from exc
            return self._keys

    # -- the flows -----------------------------------------------------------------------------

    def _client(self, redirect_url: str | None = None) -> AsyncOAuth2Client:
        secret = self.spec.client_secret
        return AsyncOAuth2Client(
            client_id=self.spec.client_id, client_secret=secret,
            token_endpoint_auth_method="client_secret_basic" if secret else "none",
            scope=" ".join(self.spec.scopes),
            redirect_uri=redirect_url or self.redirect_url,
            code_challenge_method="S256", timeout=_TIMEOUT_S)

    async def authorization(self, redirect_url: str | None = None) -> Authorization:
        meta = await self.metadata()
        state, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        verifier = generate_token(64)
        async with self._client(redirect_url) as client:
            url, _ = client.create_authorization_url(
                meta.authorization_endpoint, state=state, nonce=nonce,
                code_verifier=verifier, **self.spec.authorize_params)
        return Authorization(url, state, nonce, verifier)

    async def exchange(self, code: str, code_verifier: str,
                       redirect_url: str | None = None) -> dict[str, Any]:
        """The tokens for an authorization ``code`` (the PKCE verifier proves this client
        asked for it)."""
        meta = await self.metadata()
        try:
            async with self._client(redirect_url) as client:
                token = await client.fetch_token(meta.token_endpoint, code=code,
                                                 code_verifier=code_verifier,
                                                 grant_type="authorization_code")
        except (OAuth2Error, OAuthError, httpx.HTTPError) as exc:
            raise OidcError(f"the provider refused the authorization code: {exc}") from exc
        return dict(token)

    async def refresh(self, refresh_token: str) -> dict[str, Any]:
        """New tokens for ``refresh_token``; OidcError when the provider refuses (the
        person signed out, was disabled, or their grant was revoked)."""
        meta = await self.metadata()
        try:
            async with self._client() as client:
                token = await client.refresh_token(meta.token_endpoint,
                                                   refresh_token=refresh_token)
        except (OAuth2Error, OAuthError, httpx.HTTPError) as exc:
            raise OidcError(f"the provider refused the refresh: {exc}") from exc
        return dict(token)

    async def userinfo(self, access_token: str) -> dict[str, Any]:
        meta = await self.metadata()
        if meta.userinfo_endpoint is None:
            return {}
        try:
            async with httpx.AsyncClient(timeout=_TIMEOUT_S, verify=client_context()) as http:
                got = await http.get(meta.userinfo_endpoint,
                                     headers={"Authorization": f"Bearer {access_token}"})
        except httpx.HTTPError as exc:
            raise OidcError(f"the provider's userinfo could not be read: {exc}") from exc
        if got.status_code != 200:
            raise OidcError(f"the provider's userinfo answered {got.status_code}")
        body = got.json()
        return body if isinstance(body, dict) else {}

    # -- the ID token --------------------------------------------------------------------------

    async def _signed_claims(self, token_text: str, what: str) -> dict[str, Any]:
        """The claims of a JWT the provider signed (by its published keys, with an
        asymmetric algorithm it announces); OidcError when it is not."""
        meta = await self.metadata()
        try:
            header = jws.extract_compact(token_text.encode("ascii")).protected
        except (JoseError, ValueError, UnicodeError) as exc:
            raise OidcError(f"the {what} is malformed: {exc}") from exc
        alg = header.get("alg")
        if alg not in meta.algorithms:
            raise OidcError(f"the {what}'s algorithm {alg!r} is not accepted (accepted: "
                            f"{', '.join(meta.algorithms)})")
        kid = header.get("kid")
        keys = await self._key_set(kid if isinstance(kid, str) else None)
        try:
            token = jwt.decode(token_text, keys, algorithms=list(meta.algorithms))
        except (JoseError, ValueError) as exc:
            raise OidcError(f"the {what}'s signature does not verify: {exc}") from exc
        return dict(token.claims)

    async def verify_logout_token(self, logout_token: str) -> dict[str, Any]:
        """The claims of a back-channel ``logout_token`` (OpenID Connect Back-Channel
        Logout 1.0): signed by the provider, for this client, issued within the last
        ``LOGOUT_MAX_AGE_S``, with the logout event and a subject, and no nonce."""
        claims = await self._signed_claims(logout_token, "logout token")
        registry = jwt.JWTClaimsRegistry(
            leeway=LEEWAY_S,
            iss={"essential": True, "value": self.spec.issuer},
            aud={"essential": True, "value": self.spec.client_id},
            iat={"essential": True}, jti={"essential": True}, sub={"essential": True})
        try:
            registry.validate(claims)
        except JoseError as exc:
            raise OidcError(f"the logout token is refused: {exc}") from exc
        events = claims.get("events")
        if not isinstance(events, dict) or BACKCHANNEL_EVENT not in events:
            raise OidcError("the logout token carries no back-channel logout event")
        if "nonce" in claims:
            raise OidcError("a logout token never carries a nonce (this is an ID token)")
        issued = claims.get("iat")
        if not isinstance(issued, int) or issued < time.time() - LOGOUT_MAX_AGE_S - LEEWAY_S:
            raise OidcError(f"the logout token was issued more than {LOGOUT_MAX_AGE_S} s ago")
        return claims

    async def verify_id_token(self, id_token: str, nonce: str) -> dict[str, Any]:
        """The claims of ``id_token`` once its signature, issuer, audience, expiry and
        ``nonce`` check; OidcError saying which failed."""
        claims = await self._signed_claims(id_token, "ID token")
        registry = jwt.JWTClaimsRegistry(
            leeway=LEEWAY_S,
            iss={"essential": True, "value": self.spec.issuer},
            sub={"essential": True},
            aud={"essential": True, "value": self.spec.client_id},
            exp={"essential": True},
            nonce={"essential": True, "value": nonce})
        try:
            registry.validate(claims)
        except JoseError as exc:
            raise OidcError(f"the ID token is refused: {exc}") from exc
        audience = claims.get("aud")
        if isinstance(audience, list) and len(audience) > 1 and (
                claims.get("azp") != self.spec.client_id):
            raise OidcError("the ID token names several audiences and another authorized "
                            "party (azp)")
        return claims


def _has_kid(keys: KeySet, kid: str) -> bool:
    return any(k.kid == kid for k in keys.keys)


async def _get_json(url: str, what: str) -> dict[str, Any]:
    try:
        async with httpx.AsyncClient(timeout=_TIMEOUT_S, verify=client_context()) as http:
            got = await http.get(url)
    except httpx.HTTPError as exc:
        raise OidcError(f"the provider's {what} at {url} could not be read: {exc}") from exc
    if got.status_code != 200:
        raise OidcError(f"the provider's {what} at {url} answered {got.status_code}")
    try:
        body = got.json()
    except ValueError as exc:
        raise OidcError(f"the provider's {what} at {url} is not JSON") from exc
    if not isinstance(body, dict):
        raise OidcError(f"the provider's {what} at {url} is not a JSON object")
    return body
