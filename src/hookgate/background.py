"""One long-running task an object owns (a loop that waits for timers or notifications):
started at most once, and on stop cancelled and awaited, so nothing of it runs afterwards.

Imports nothing of hookgate, so every layer can use it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["BackgroundTask"]


class BackgroundTask:
    """The task named ``name``, while it runs."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self, work: Callable[[], Coroutine[Any, Any, None]]) -> bool:
        """Start ``work()`` unless it runs already; whether this call started it."""
        if self._task is not None:
            return False
        self._task = asyncio.create_task(work(), name=self.name)
        return True

    async def stop(self) -> None:
        """Cancel the task and wait until it has ended (a no-op when none runs)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
