"""Bearer-token authentication: ``Authorization: Bearer <token>`` identifies the user.

The two Server-Sent Events routes also take the token as ``?access_token=`` (see
``require_stream_caller``); every other route takes the header only. A valid token's user is
remembered for two seconds (server/token_cache.py), so revocation holds within that time.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from hookgate.server.runtime import Caller, Runtime
from hookgate.server.token_cache import TokenCache

STREAM_TOKEN_PARAM = "access_token"

_CACHES: weakref.WeakKeyDictionary[Runtime, TokenCache[Caller]] = weakref.WeakKeyDictionary()


def token_cache(runtime: Runtime) -> TokenCache[Caller]:
    """The runtime's memory of recent token lookups."""
    cache = _CACHES.get(runtime)
    if cache is None:
        cache = _CACHES[runtime] = TokenCache()
    return cache


def runtime_of(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def _bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def _caller_for(request: Request, token: str | None, missing: str) -> Caller:
    if token is None:
        raise HTTPException(401, missing, headers={"WWW-Authenticate": "Bearer"})
    runtime = runtime_of(request)
    caller = await token_cache(runtime).lookup(token, runtime.authenticate)
    if caller is None:
        raise HTTPException(401, "the bearer token is not valid",
                            headers={"WWW-Authenticate": "Bearer"})
    return caller


async def require_caller(request: Request) -> Caller:
    return await _caller_for(request, _bearer_token(request),
                             "missing bearer token: send 'Authorization: Bearer <token>'")


async def require_stream_caller(request: Request) -> Caller:
    """The caller of an SSE route: the header, or else ``?access_token=<token>``.

    A browser's ``EventSource`` cannot send an Authorization header, so the portal has no
    other way to open a live stream. A URL is the wrong place for a secret (it reaches access
    logs, proxies and browser history), so the query token is accepted only where there is no
    alternative: the two streams, which only read. Every other route, and any that decides
    something, keeps to the header.
    """
    token = _bearer_token(request)
    if token is None:
        token = (request.query_params.get(STREAM_TOKEN_PARAM) or "").strip() or None
    return await _caller_for(
        request, token,
        f"missing bearer token: send 'Authorization: Bearer <token>' or "
        f"'?{STREAM_TOKEN_PARAM}=<token>'")


CallerDep = Annotated[Caller, Depends(require_caller)]
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


async def require_stream_access(request: Request) -> Access:
    return Access(await require_stream_caller(request), runtime_of(request))


AccessDep = Annotated[Access, Depends(require_access)]
StreamAccessDep = Annotated[Access, Depends(require_stream_access)]
