"""OAuth 2.1 for the HTTP gateway, as the MCP authorization specification asks of a resource
server: protected-resource metadata (RFC 9728), ``WWW-Authenticate`` naming it on a 401, and
access tokens from the configured authorization server validated with their scopes.

An access token is a JWT signed by a key of the issuer's JWKS, issued by ``issuer`` for this
gateway (``aud``: the server's ``/mcp`` or ``/mcp/<agent>`` URL, or the configured
``audience``), unexpired, carrying every scope of ``scopes``; its ``user_claim`` names the
hookgate user it acts for, who must exist and be enabled. A token lacking a scope is refused
with 403 ``insufficient_scope``. hookgate's own API tokens keep working beside it.
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

    def __init__(self, spec: McpOAuthSpec) -> None:
        self.spec = spec
        self._keys = jwt.PyJWKClient(spec.jwks_url, cache_keys=True, lifespan=300)

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

    async def grant(self, runtime: Runtime, token: str, resources: Sequence[str]
                    ) -> OAuthGrant:
        """The grant of ``token`` for one of ``resources``; TokenRefused says why not."""
        claims = await self._claims(token, resources)
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
                audience=[self.spec.audience] if self.spec.audience else list(resources),
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
