"""Bearer-token authentication: ``Authorization: Bearer <token>`` identifies the user."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request

from hookgate.server.runtime import Caller, Runtime


def runtime_of(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def require_caller(request: Request) -> Caller:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HTTPException(401, "missing bearer token: send 'Authorization: Bearer <token>'",
                            headers={"WWW-Authenticate": "Bearer"})
    caller = await runtime_of(request).authenticate(token.strip())
    if caller is None:
        raise HTTPException(401, "the bearer token is not valid",
                            headers={"WWW-Authenticate": "Bearer"})
    return caller


CallerDep = Annotated[Caller, Depends(require_caller)]
RuntimeDep = Annotated[Runtime, Depends(runtime_of)]
