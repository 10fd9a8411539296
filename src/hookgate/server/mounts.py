"""What the app serves beside its own API: a `Mount` is an interface another package adds
(the MCP gateway at ``/mcp``), given to `create_app` by whoever composes the server, so the
server never imports the interfaces it serves next to."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from fastapi import FastAPI


class Mount(Protocol):
    """Adds its routes to ``app``; the context it returns runs for the app's lifetime
    (entered once the runtime started, left before it stops)."""

    def install(self, app: FastAPI) -> AbstractAsyncContextManager[None]: ...
