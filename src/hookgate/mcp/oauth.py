"""OAuth 2.1 for the HTTP gateway, as the MCP authorization specification asks of a resource
server: protected-resource metadata (RFC 9728), ``WWW-Authenticate`` naming it on a 401, and
access tokens from the configured authorization server validated with their scopes.

An access token is a JWT signed by a key of the issuer's JWKS, issued by ``issuer`` for this
gateway (``aud``: the configured ``audience``, else ``/mcp`` or ``/mcp/<agent>`` on
``server.public_url``; taken from the configuration only, never from the request, so a
gateway without either refuses to start), unexpired, carrying every scope of ``scopes``; its
``user_claim`` names the hookgate user it acts for, who must exist and be enabled. A token
lacking a scope is refused with 403 ``insufficient_scope``. hookgate's own API tokens keep
working beside it. `OAuthResource.grant` is the one verification, for the HTTP requests and
the relay's socket alike.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jwt

from hookgate.config.mcp_servers import McpOAuthSpec
from hookgate.runtime.runtime import Caller, Runtime
from hookgate.storage.tables import User

#: Where RFC 9728 puts a resource's metadata: this prefix, then the resource's path.
METADATA_PREFIX = "/.well-known/oauth-protected-resource"
#: Signing algorithms accepted (asymmetric only: a shared secret is not a JWKS key).
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"]


#: The one-line refusal of a gateway whose tokens' audience the configuration does not give.
NO_AUDIENCE = ("server.mcp_oauth needs server.public_url or server.mcp_oauth.audience: the "
               "access tokens' audience comes from the configuration, never from the "
               "request's Host header")


class NoAudience(ValueError):
    """``mcp_oauth`` without ``public_url`` or ``audience``: no audience to check against."""


class TokenRefused(Exception):
    """The access token is not valid here; ``error`` is its RFC 6750 error code (None when
    the request carried no token at all)."""

    def __init__(self, message: str, *, error: str | None = "invalid_token",
                 status: int = 401) -> None:
        super().__init__(message)
        self.error = error
        self.status = status


@dataclass(frozen=True, slots=True)
class OAuthGrant:
    """A validated access token: whom it acts for, until when, with which scopes."""

    caller: Caller
    expires_at: float
    scopes: frozenset[str]


class OAuthResource:
    """The gateway as an OAuth protected resource."""

    def __init__(self, spec: McpOAuthSpec, public_url: str | None) -> None:
        if not spec.audience and not public_url:
            raise NoAudience(NO_AUDIENCE)
        self.spec = spec
        #: The configured server URL (no trailing slash), or None with ``audience`` only.
        self.public_url = public_url.rstrip("/") if public_url else None
        self._keys = jwt.PyJWKClient(spec.jwks_url, cache_keys=True, lifespan=300)

    def audiences(self, agent_id: str) -> list[str]:
        """The ``aud`` values a token for agent ``agent_id``'s gateway may carry, from the
        configuration alone: ``audience``, else ``/mcp/<agent>`` and ``/mcp`` on
        ``public_url``."""
        if self.spec.audience:
            return [self.spec.audience]
        assert self.public_url is not None  # __init__ refused a resource without either
        return [f"{self.public_url}/mcp/{agent_id}", f"{self.public_url}/mcp"]

    def resource(self, path: str) -> str:
        """The resource a metadata document at ``path`` (``/mcp`` or ``/mcp/<agent>``)
        describes: ``path`` on ``public_url``, else the configured ``audience``."""
        if self.public_url is not None:
            return f"{self.public_url}{path}"
        assert self.spec.audience is not None
        return self.spec.audience

    def metadata(self, resource: str) -> dict[str, Any]:
        """The protected-resource metadata document of ``resource`` (RFC 9728)."""
        return {
            "resource": resource,
            "authorization_servers": [self.spec.issuer],
            "scopes_supported": list(self.spec.scopes),
            "bearer_methods_supported": ["header"],
            "resource_name": "hookgate MCP gateway",
        }

    def challenge(self, metadata_url: str, refused: TokenRefused | None = None) -> str:
        """The ``WWW-Authenticate`` value of a refusal, naming the metadata document."""
        parts = [f'resource_metadata="{metadata_url}"']
        if self.spec.scopes:
            parts.append(f'scope="{" ".join(self.spec.scopes)}"')
        if refused is not None and refused.error is not None:
            said = str(refused).replace('"', "'")
            parts += [f'error="{refused.error}"', f'error_description="{said}"']
        return "Bearer " + ", ".join(parts)

    async def grant(self, runtime: Runtime, token: str, agent_id: str) -> OAuthGrant:
        """The grant of ``token`` for agent ``agent_id``'s gateway (HTTP and the relay's
        socket alike); TokenRefused says why not."""
        claims = await self._claims(token, self.audiences(agent_id))
        scopes = _scopes(claims)
        missing = [s for s in self.spec.scopes if s not in scopes]
        if missing:
            raise TokenRefused(f"the token lacks the scope {' '.join(missing)}",
                               error="insufficient_scope", status=403)
        user_id = claims.get(self.spec.user_claim)
        if not isinstance(user_id, str) or not user_id:
            raise TokenRefused(f"the token names no user in its '{self.spec.user_claim}' claim")
        caller = await caller_of_user(runtime, user_id)
        if caller is None:
            raise TokenRefused(f"the token's user '{user_id}' is not an enabled hookgate user")
        return OAuthGrant(caller, float(claims["exp"]), frozenset(scopes))

    async def _claims(self, token: str, resources: Sequence[str]) -> Mapping[str, Any]:
        try:
            # The JWKS is fetched (and cached) by a blocking client: off the event loop.
            key = await asyncio.to_thread(self._keys.get_signing_key_from_jwt, token)
            return dict(jwt.decode(
                token, key.key, algorithms=ALGORITHMS, issuer=self.spec.issuer,
                audience=list(resources),
                options={"require": ["exp", "iss", "aud"]}, leeway=30))
        except jwt.PyJWKClientConnectionError as exc:
            raise TokenRefused(f"the issuer's keys could not be fetched: {exc}") from exc
        except jwt.PyJWTError as exc:
            raise TokenRefused(f"the access token is not valid: {exc}") from exc


def _scopes(claims: Mapping[str, Any]) -> set[str]:
    # RFC 9068 ``scope`` (space-separated); some servers use a ``scp`` list.
    found: set[str] = set()
    scope = claims.get("scope")
    if isinstance(scope, str):
        found.update(scope.split())
    scp = claims.get("scp")
    if isinstance(scp, list):
        found.update(str(s) for s in scp)
    elif isinstance(scp, str):
        found.update(scp.split())
    return found


async def caller_of_user(runtime: Runtime, user_id: str) -> Caller | None:
    """The enabled hookgate user ``user_id`` as a caller; None when unknown or disabled."""
    async with runtime.db.session() as s:
        user = await s.get(User, user_id)
    if user is None or user.disabled:
        return None
    return Caller(user.id, user.org_id, user.admin, user.name, bool(user.service))


async def grant_still_allowed(runtime: Runtime, grant: OAuthGrant) -> bool:
    """Whether the grant still holds: unexpired, its user enabled in the same org with no
    right lost. A failed look-up answers False (fail closed)."""
    if time.time() >= grant.expires_at:
        return False
    try:
        now = await caller_of_user(runtime, grant.caller.user_id)
    except Exception:
        return False
    caller = grant.caller
    return (now is not None and now.org_id == caller.org_id
            and (now.admin or not caller.admin))
