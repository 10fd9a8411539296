"""Bearer-token authentication: ``Authorization: Bearer <token>`` identifies the user.

The two Server-Sent Events routes also take the token as ``?access_token=`` (see
``require_stream_caller``); every other route takes the header only. A valid token's user is
remembered for two seconds (runtime/token_cache.py): a revocation (API, CLI, or a configuration
synced by a starting instance) clears that memory in its own process and, on PostgreSQL, in
every instance that hears its notification; otherwise it holds within the two seconds.
Connections that outlive one request (the event streams, MCP sessions, an MCP call waiting for
approval) ask `still_allowed` again while they last: the one answer to "may this caller still
see it", for every route and connection. The routes that show or decide approval requests and
standing rules take `CurrentCallerDep`: the caller as the user records say at that moment,
never the remembered lookup (a person moved or removed a moment ago decides and reads nothing).

With ``oidc:`` configured, a person signed in through the identity provider is the caller of
their session (hookgate.server.oidc): the browser's cookie, whose state-changing requests
must send the session's CSRF token in ``X-CSRF-Token``, or the CLI's session id as a bearer
token. Sessions are read from the database on every request, never remembered.
"""

from __future__ import annotations

import hmac
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, HTTPException, Request

from hookgate.runtime.auth import caller_for_token, same_access, still_allowed
from hookgate.runtime.runtime import Caller, Runtime
from hookgate.runtime.token_cache import token_key
from hookgate.storage.oidc_sessions import SESSION_PREFIX

if TYPE_CHECKING:
    from hookgate.server.oidc.sign_in import SignIn

STREAM_TOKEN_PARAM = "access_token"
#: The browser session's cookie and the header its state-changing requests send back.
SESSION_COOKIE = "hookgate_session"
CSRF_HEADER = "x-csrf-token"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def runtime_of(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def _bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def sign_in_of(request: Request) -> SignIn | None:
    """The app's sign-in through an identity provider (None without ``oidc:``)."""
    found: SignIn | None = getattr(request.app.state, "sign_in", None)
    return found


async def session_caller(request: Request, token: str | None) -> Caller | None:
    """The caller of the request's provider session, or None when it uses none: the CLI's
    session id as ``token``, else the browser's cookie (then a state-changing request must
    carry the session's CSRF token). 401 for a session that ended, 403 for a missing or
    wrong CSRF token."""
    sign_in = sign_in_of(request)
    if sign_in is None:  # no provider: no session (its cookies are not even parsed)
        return None
    cookie = request.cookies.get(SESSION_COOKIE)
    from_header = token is not None and token.startswith(SESSION_PREFIX)
    if not (from_header or (token is None and cookie)):
        return None
    session_id = token if from_header else cookie
    assert session_id is not None
    session = await sign_in.session(session_id)
    if session is None:
        raise HTTPException(401, "the sign-in session ended or is not valid: sign in again",
                            headers={"WWW-Authenticate": "Bearer"})
    if not from_header and request.method not in _SAFE_METHODS:
        sent = request.headers.get(CSRF_HEADER, "")
        if not sent or not hmac.compare_digest(sent, session.record.csrf_token):
            raise HTTPException(403, "missing or wrong CSRF token: a signed-in browser "
                                     "sends the session's token in X-CSRF-Token")
    return session.caller


async def _caller_for(request: Request, token: str | None, missing: str,
                      key: str | None = None) -> Caller:
    by_session = await session_caller(request, token)
    if by_session is not None:
        return by_session
    if token is None:
        raise HTTPException(401, missing, headers={"WWW-Authenticate": "Bearer"})
    caller = await caller_for_token(runtime_of(request), token, key)
    if caller is None:
        raise HTTPException(401, "the bearer token is not valid",
                            headers={"WWW-Authenticate": "Bearer"})
    return caller


_MISSING_TOKEN = "missing bearer token: send 'Authorization: Bearer <token>'"


async def require_caller(request: Request) -> Caller:
    return await _caller_for(request, _bearer_token(request), _MISSING_TOKEN)


def _stream_token(request: Request) -> str | None:
    token = _bearer_token(request)
    if token is None:
        token = (request.query_params.get(STREAM_TOKEN_PARAM) or "").strip() or None
    return token


async def require_stream_caller(request: Request) -> Caller:
    """The caller of an SSE route: the header, or else ``?access_token=<token>``.

    A browser's ``EventSource`` cannot send an Authorization header, so the portal has no
    other way to open a live stream. A URL is the wrong place for a secret (it reaches access
    logs, proxies and browser history), so the query token is accepted only where there is no
    alternative: the two streams, which only read. Every other route, and any that decides
    something, keeps to the header.
    """
    return await _caller_for(
        request, _stream_token(request),
        f"missing bearer token: send 'Authorization: Bearer <token>' or "
        f"'?{STREAM_TOKEN_PARAM}=<token>'")


async def require_current_caller(request: Request) -> Caller:
    """The caller as the user records say now (the token cache is not asked): for the routes
    that show or decide approval requests and standing rules."""
    token = _bearer_token(request)
    by_session = await session_caller(request, token)
    if by_session is not None:
        return by_session
    if token is None:
        raise HTTPException(401, _MISSING_TOKEN, headers={"WWW-Authenticate": "Bearer"})
    caller = await runtime_of(request).authenticate(token)
    if caller is None:
        raise HTTPException(401, "the bearer token is not valid",
                            headers={"WWW-Authenticate": "Bearer"})
    return caller


CallerDep = Annotated[Caller, Depends(require_caller)]
CurrentCallerDep = Annotated[Caller, Depends(require_current_caller)]
StreamCallerDep = Annotated[Caller, Depends(require_stream_caller)]
async def _runtime_dependency(request: Request) -> Runtime:
    # A coroutine, not a plain function: FastAPI runs a plain dependency in a worker thread,
    # a round trip through the thread pool on every request.
    return runtime_of(request)


RuntimeDep = Annotated[Runtime, Depends(_runtime_dependency)]


@dataclass(frozen=True, slots=True)
class Access:
    """The caller and the runtime serving them: one dependency where two would each cost a
    pass of FastAPI's dependency solver (the run routes every run calls)."""

    caller: Caller
    rt: Runtime


async def require_access(request: Request) -> Access:
    return Access(await require_caller(request), runtime_of(request))


@dataclass(frozen=True, slots=True)
class LastingAccess:
    """The caller of a connection that lasts (a stream, a hook call waiting for a person),
    and how to ask again while it does (`still_allowed`)."""

    caller: Caller
    rt: Runtime
    token: str
    #: The token's key in the runtime's token cache.
    key: str = field(init=False, repr=False, compare=False)
    #: The app's provider sign-in, when ``token`` is a session id (hookgate.server.oidc).
    sign_in: SignIn | None = None
    #: ``token``'s key when the dependency made it already (for the cache's lookup).
    known_key: InitVar[str | None] = None

    def __post_init__(self, known_key: str | None) -> None:
        object.__setattr__(self, "key", token_key(self.token) if known_key is None
                           else known_key)

    async def still_allowed(self) -> bool:
        if self.sign_in is not None:
            return await self.still_current()
        # A stream asks before each event: the token's key is computed once.
        return await still_allowed(self.rt, self.token, self.caller, key=self.key)

    async def still_current(self) -> bool:
        """`still_allowed`, read from the user records now (not the token cache): for a
        stream whose events are approval requests, asked before each one."""
        try:
            if self.sign_in is not None:
                session = await self.sign_in.session(self.token)
                return session is not None and same_access(session.caller, self.caller)
            now = await self.rt.authenticate(self.token)
        except Exception:  # fail closed: the stream ends, its client reconnects
            return False
        return now is not None and same_access(now, self.caller)


def _lasting(request: Request, caller: Caller, token: str | None,
             key: str | None = None) -> LastingAccess:
    if caller.sign_in != "token":
        # A provider session: its id (the CLI's bearer token, or the browser's cookie).
        session_id = token if token is not None and token.startswith(SESSION_PREFIX) \
            else request.cookies.get(SESSION_COOKIE)
        assert session_id is not None  # session_caller found the session by one of them
        return LastingAccess(caller, runtime_of(request), session_id, sign_in_of(request))
    assert token is not None  # the caller was refused without one
    return LastingAccess(caller, runtime_of(request), token, known_key=key)


async def require_stream_access(request: Request) -> LastingAccess:
    caller = await require_stream_caller(request)
    return _lasting(request, caller, _stream_token(request))


async def require_lasting_access(request: Request) -> LastingAccess:
    # The token read and its cache key made once: for the caller's lookup and the
    # connection's re-checks.
    token = _bearer_token(request)
    key = None if token is None else token_key(token)
    caller = await _caller_for(request, token, _MISSING_TOKEN, key)
    return _lasting(request, caller, token, key)


def recheck_s(request: Request) -> float:
    """How often the app's long-lived connections re-check their caller."""
    return float(request.app.state.access_recheck_s)


AccessDep = Annotated[Access, Depends(require_access)]
StreamAccessDep = Annotated[LastingAccess, Depends(require_stream_access)]
LastingAccessDep = Annotated[LastingAccess, Depends(require_lasting_access)]
