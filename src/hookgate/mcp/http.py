"""``/mcp/{agent_id}``: the gateway over streamable HTTP, mounted on the hookgate server.

The bearer token is a hookgate user's; a session belongs to the user and agent that opened
it (the SDK refuses the session to any other credential). Every request signs in again, and
one that stays open (a call waiting for approval, the session's event stream) asks every
``access_recheck_s`` seconds: once the token no longer signs in as the same user of the same
org, the session ends and its waiting calls are cancelled. Everything else is the SDK's
streamable-HTTP session manager, serving both the handshake and the per-request protocol eras.
With ``server: mcp_oauth`` the gateway is also an OAuth protected resource (hookgate.mcp.oauth):
its metadata is served under ``/.well-known/oauth-protected-resource``, a 401 names it in
``WWW-Authenticate``, and the issuer's access tokens are accepted with their scopes.
A service identity's token names the person its calls act for in the ``Hookgate-Acts-For``
header (approvals/authority.py's `acting_for` checks it on every request); that person is
the calls' initiator, and the service itself never decides.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import uuid
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

from mcp import MCPError
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.inbound import MCP_METHOD_HEADER, MCP_NAME_HEADER, decode_header_value
from mcp_types import INVALID_REQUEST
from starlette.types import Receive, Scope, Send

from hookgate.approvals.authority import NotActingFor, acting_for
from hookgate.mcp.gateway import McpGateway, Principal
from hookgate.mcp.oauth import METADATA_PREFIX, OAuthResource, TokenRefused, grant_still_allowed
from hookgate.mcp.served import ASKING, build_mcp_server
from hookgate.mcp.session_socket import refuse_socket, serve_socket
from hookgate.mcp.wiring import gateway_for, principal_for
from hookgate.runtime.access_watch import AccessEnded, StillAllowed, while_allowed
from hookgate.runtime.auth import caller_for_token
from hookgate.runtime.deployment import ACCESS_RECHECK_S, token_digest
from hookgate.runtime.runtime import Runtime

_PRINCIPAL = "hookgate.mcp.principal"
#: The header a service identity names the person its calls act for in (HTTP and socket).
ACTS_FOR_HEADER = b"hookgate-acts-for"

log = logging.getLogger(__name__)


class McpHttpEndpoint:
    """The ASGI app behind ``/mcp``; `running()` belongs in the server's lifespan."""

    def __init__(self, runtime: Runtime, *, access_recheck_s: float = ACCESS_RECHECK_S,
                 **settings: Any) -> None:
        self.runtime = runtime
        self.access_recheck_s = access_recheck_s
        self.settings = {**settings, "access_recheck_s": access_recheck_s}
        self.gateway: McpGateway | None = None
        self._manager: StreamableHTTPSessionManager | None = None
        spec = runtime.deployment.mcp_oauth
        # NoAudience (mcp_oauth without public_url or audience): the server does not start.
        self.oauth = (OAuthResource(spec, runtime.deployment.public_url)
                      if spec is not None else None)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        gateway = self.gateway = gateway_for(self.runtime, **self.settings)
        # No DNS-rebinding host check: every request needs a bearer token, which a
        # rebinding page cannot borrow from the browser.
        manager = self._manager = StreamableHTTPSessionManager(
            build_mcp_server(gateway, _principal_of), stateless=False)
        try:
            async with manager.run():
                yield
        finally:
            # Calls waiting on the gate stop with their requests still pending.
            self.runtime.approvals.begin_shutdown()
            await gateway.aclose()
            self._manager = self.gateway = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return
        root = scope.get("root_path", "")
        path = scope["path"][len(root):] if scope["path"].startswith(root) else scope["path"]
        agent_id = path.strip("/")
        if not agent_id or "/" in agent_id:
            await _deny(scope, send, 404, "use /mcp/<agent id>")
            return
        token = _bearer(scope)
        if token is None:
            await self._refuse(scope, send, agent_id, TokenRefused(
                "missing bearer token: send 'Authorization: Bearer <token>'", error=None))
            return
        allowed: StillAllowed | None = None
        caller = await caller_for_token(self.runtime, token)
        if caller is None and self.oauth is not None:
            try:
                grant = await self.oauth.grant(self.runtime, token, agent_id)
            except TokenRefused as refused:
                await self._refuse(scope, send, agent_id, refused)
                return
            caller, allowed = grant.caller, partial(grant_still_allowed, self.runtime, grant)
        if caller is None:
            await self._refuse(scope, send, agent_id,
                               TokenRefused("the bearer token is not valid"))
            return
        try:
            acting = await acting_for(self.runtime.db, caller.user_id, caller.org_id,
                                      caller.service, _header(scope, ACTS_FOR_HEADER))
        except NotActingFor as exc:
            await _deny(scope, send, 403, str(exc))
            return
        socket = scope["type"] == "websocket"
        session_id = f"socket-{uuid.uuid4().hex}" if socket else _header(scope,
                                                                         b"mcp-session-id")
        who = principal_for(self.runtime, agent_id, caller, token, session_id, allowed)
        if who is None:
            await _deny(scope, send, 404, f"no MCP gateway for agent '{agent_id}' in org "
                                          f"'{caller.org_id}'")
            return
        if acting is not None and acting != who.user_id:
            # The calls' initiator is the person acted for; while they wait, the token's own
            # access and the service's right to act for that person are re-checked.
            who = dataclasses.replace(who, user_id=acting, still_allowed=_still_acting(
                self.runtime, caller.user_id, caller.org_id, acting, who.still_allowed))
        if self._manager is None or self.gateway is None:
            await _deny(scope, send, 503, "the MCP gateway is not running")
            return
        if socket:
            await self._socket(who, receive, send)
            return
        scope = dict(scope)
        scope[_PRINCIPAL] = who
        # The session manager binds a session to the credential that opened it.
        scope["user"] = AuthenticatedUser(AccessToken(
            token=token_digest(token), client_id=caller.user_id, scopes=[], subject=agent_id))
        manager, gateway = self._manager, self.gateway

        async def lost() -> None:
            log.warning("user %s lost access: MCP session %s ends", caller.user_id, session_id)
            await gateway.cancel_waits_of(who.user_id)
            await _end_session(manager, session_id)

        called = _called_tool(scope)

        async def handle() -> None:
            if called is not None:
                # A per-request call names its tool in a header: its server's listing is
                # made ready first, so the SDK's check of the call's Mcp-Param headers reads
                # the schema from it (see served.ASKING).
                await gateway.prepare_call(who, called)
            await manager.handle_request(scope, receive, send)

        asking = ASKING.set(who)
        try:
            with contextlib.suppress(AccessEnded):  # the session's streams are closed
                await while_allowed(handle(), who.still_allowed, self.access_recheck_s,
                                    on_lost=lost)
        finally:
            ASKING.reset(asking)


    async def _socket(self, who: Principal, receive: Receive, send: Send) -> None:
        """The relay's one connection: the session over a WebSocket (mcp/session_socket.py)."""
        gateway = self.gateway
        assert gateway is not None
        gateway.warm(who.access.server_ids())

        async def lost() -> None:
            log.warning("user %s lost access: their MCP socket closes", who.user_id)
            await gateway.cancel_waits_of(who.user_id)

        await serve_socket(gateway, who, receive, send, recheck_s=self.access_recheck_s,
                           on_lost=lost)

    # -- OAuth: refusals that name the resource metadata, and the metadata itself ----------

    def _base(self, scope: Scope) -> str:
        # Where the metadata document is served, for a client to find it: server.public_url,
        # else the URL this request came in on. Only a pointer: what a token must be issued
        # for is the configuration's alone (OAuthResource.audiences).
        public = self.runtime.deployment.public_url
        if public:
            return public.rstrip("/")
        host = _header(scope, b"host") or "localhost"
        return f"{scope.get('scheme', 'http')}://{host}"

    async def _refuse(self, scope: Scope, send: Send, agent_id: str,
                      refused: TokenRefused) -> None:
        challenge = "Bearer"
        if self.oauth is not None:
            url = f"{self._base(scope)}{METADATA_PREFIX}/mcp/{agent_id}"
            challenge = self.oauth.challenge(url, refused)
        await _deny(scope, send, refused.status, str(refused), challenge=challenge)

    async def metadata(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``/.well-known/oauth-protected-resource[/mcp[/<agent>]]`` (RFC 9728): 404 when
        the gateway takes no OAuth tokens."""
        if scope["type"] != "http":
            return
        root = scope.get("root_path", "")
        path = scope["path"][len(root):] if scope["path"].startswith(root) else scope["path"]
        path = path.rstrip("/")
        if self.oauth is None or not (path in ("", "/mcp") or path.startswith("/mcp/")):
            await _error(send, 404, "no OAuth-protected resource here (server.mcp_oauth is "
                                    "not configured)")
            return
        body = self.oauth.metadata(self.oauth.resource(path or "/mcp"))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"cache-control", b"max-age=300")]})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})


async def _end_session(manager: StreamableHTTPSessionManager, session_id: str | None) -> None:
    # The SDK's own way to end a session (a client's DELETE) is its transport's terminate():
    # every stream of the session closes and the manager forgets it, so its id answers 404.
    transport = getattr(manager, "_server_instances", {}).get(session_id) \
        if session_id is not None else None
    if transport is not None:
        await transport.terminate()


def _principal_of(ctx: ServerRequestContext[Any, Any]) -> Principal:
    request = ctx.request
    who = request.scope.get(_PRINCIPAL) if request is not None else None
    if not isinstance(who, Principal):
        raise MCPError(INVALID_REQUEST, "this request carries no authenticated hookgate user")
    return who


def _called_tool(scope: Scope) -> str | None:
    # The tool a per-request (2026-07-28) tools/call names in its routing headers (the SDK
    # refuses the request when they differ from its body).
    if _header(scope, MCP_METHOD_HEADER.encode()) != "tools/call":
        return None
    return decode_header_value(_header(scope, MCP_NAME_HEADER.encode()))


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _bearer(scope: Scope) -> str | None:
    scheme, _, token = (_header(scope, b"authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def _deny(scope: Scope, send: Send, status: int, message: str, *,
                challenge: str = "Bearer") -> None:
    """An HTTP request's error answer, or a WebSocket handshake's refusal."""
    if scope["type"] == "websocket":
        await refuse_socket(send, status, message, challenge)
    else:
        await _error(send, status, message, challenge=challenge)


async def _error(send: Send, status: int, message: str, *,
                 challenge: str = "Bearer") -> None:
    headers = [(b"content-type", b"application/json")]
    if status in (401, 403):
        headers.append((b"www-authenticate", challenge.encode("latin-1", "replace")))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps({"error": message}).encode()})


def _still_acting(runtime: Runtime, caller_id: str, org_id: str, acting: str,
                  allowed: StillAllowed | None) -> StillAllowed:
    """``allowed``, and the service ``caller_id`` may still act for ``acting`` now
    (approvals/authority.py's `acting_for`: enabled, a person, of the same org)."""
    async def still() -> bool:
        if allowed is not None and not await allowed():
            return False
        try:
            await acting_for(runtime.db, caller_id, org_id, True, acting)
        except NotActingFor:
            return False
        return True

    return still
