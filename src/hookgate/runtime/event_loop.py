"""Naming this thread's event loop for the libraries that ask which one runs.

anyio (under the MCP SDK, Starlette and httpx) asks sniffio which async library runs the
current task before much of what it does (a memory stream's send, a cancel scope, a task
group). asyncio does not tell sniffio, so each answer is found by calling
``asyncio.current_task()``: under the MCP gateway about a tenth of the server's CPU per
call. A loop that is asyncio's for its whole life (``hookgate serve``, ``hookgate mcp stdio
--in-process``) says so once, through sniffio's own per-thread setting for event loops, and
every later answer is a read of that setting.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

try:
    import sniffio
except ImportError:  # anyio then asks asyncio directly, which is already cheap
    sniffio = None  # type: ignore[assignment]


@contextmanager
def asyncio_named() -> Iterator[None]:
    """While inside, sniffio answers "asyncio" on this thread without looking (enter it in
    the coroutine the asyncio loop runs, and leave it before the loop ends)."""
    if sniffio is None:
        yield
        return
    previous = sniffio.thread_local.name
    sniffio.thread_local.name = "asyncio"
    try:
        yield
    finally:
        sniffio.thread_local.name = previous
