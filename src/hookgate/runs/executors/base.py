"""The RunExecutor interface: submit a new run, continue a stored one, cancel one, and the
shared ending of a run (the end-of-run hook, called in the background)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from hookgate.engines.state import RunState

log = logging.getLogger(__name__)

#: How long a stopping process waits for end-of-run hooks still running.
DRAIN_S = 5.0

EndHook = Callable[[RunState], Awaitable[None]]


class RunExecutor(Protocol):
    """Decides where and when runs advance. ``start`` begins executing (for the worker
    role); ``stop`` stops without cancelling anything: stored runs continue later."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def submit(self, state: RunState) -> None:
        """Store a new run and have it advance."""
        ...

    async def cancel(self, run_id: str) -> bool:
        """End a run as cancelled; False if it was not in flight."""
        ...


class RunEndings:
    """Runs the end-of-run hook for runs that ended here, each in a task of its own."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def ended(self, state: RunState, hook: EndHook | None) -> None:
        if hook is None:
            return

        async def call() -> None:
            try:
                await hook(state)
            except Exception:
                log.exception("the end-of-run hook of run %s failed", state.run_id)

        task = asyncio.create_task(call(), name=f"after-{state.run_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        if self._tasks:  # summaries of runs that ended just before
            await asyncio.wait(list(self._tasks), timeout=DRAIN_S)
