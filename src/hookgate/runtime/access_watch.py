"""Work that lasts only while its caller keeps access: an MCP session or request, a call
waiting for a person (MCP gateway, Claude Code hooks).

`while_allowed` runs the work and asks the caller's ``still_allowed`` (the one answer,
hookgate.runtime.auth.still_allowed) every few seconds; once it says no the work is cancelled
and `AccessEnded` raised. Event streams ask the same question on their own timer (server/sse.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

#: Whether the caller may still use what they opened (False when it cannot be told).
StillAllowed = Callable[[], Awaitable[bool]]

log = logging.getLogger(__name__)


class AccessEnded(Exception):
    """The caller lost access while the work ran: it was cancelled, or (when it could not be
    interrupted) it finished and its result is not the caller's to see."""

    def __init__(self, finished: bool) -> None:
        self.finished = finished
        super().__init__("the caller's access ended (token revoked or expired, user disabled, "
                         "removed or moved to another org)")


async def asked(still_allowed: StillAllowed) -> bool:
    """``still_allowed()``, False when asking fails (fail closed)."""
    try:
        return await still_allowed()
    except Exception as exc:
        log.warning("re-checking a caller's access failed; treating it as ended: %s", exc)
        return False


async def while_allowed(work: Coroutine[Any, Any, T], still_allowed: StillAllowed | None,
                        every: float, *, interruptible: Callable[[], bool] = lambda: True,
                        on_lost: Callable[[], Awaitable[None]] | None = None) -> T:
    """``work``'s result, asking ``still_allowed`` every ``every`` seconds while it runs
    and once more when it ends (its result is the caller's only if they still have access).

    Once the answer is no: ``on_lost`` is awaited, and the work is cancelled as soon as
    ``interruptible()`` (an approved call running downstream is left to finish, its result
    withheld); then AccessEnded. Without ``still_allowed`` the work simply runs.
    """
    if still_allowed is None:
        return await work
    running = asyncio.ensure_future(work)
    lost = False
    try:
        while not running.done():
            await asyncio.wait({running}, timeout=every)
            if running.done():
                break
            if not lost and not await asked(still_allowed):
                lost = True
                if on_lost is not None:
                    await on_lost()
            if lost and interruptible() and not running.done():
                running.cancel()
                # Let it end its own way (the gate cancels the request it waits on).
                await asyncio.wait({running})
                _retrieve(running)
                raise AccessEnded(finished=False)
    except asyncio.CancelledError:
        # Cancelled from outside (the client cancelled, the server stops): the work is
        # cancelled and ends its own way before this does, as if it ran here.
        running.cancel()
        await asyncio.wait({running})
        _retrieve(running)
        raise
    if not lost and not await asked(still_allowed):
        # Asked once more when the work ends: an answer reached after the access ended
        # (a call approved just after its caller's token was revoked) is not the caller's.
        lost = True
    if lost:
        _retrieve(running)  # the result is not shown
        raise AccessEnded(finished=True)
    return running.result()


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
