"""Python hooks: a function ``module:function`` gets the hook input as a dict and returns
the answer as a dict (or None to allow).

The function may be async, or sync: then it runs on hookgate's own bounded pool of threads
(never asyncio's default one), so it cannot stall the event loop or the rest of the process.
A thread cannot be killed, so a timed-out call is abandoned and keeps its thread until it
returns; an agent may hold at most ``PER_AGENT`` threads and the pool ``POOL_SIZE``, and a
call that would need more fails at once (closed) instead of queueing behind hung ones.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar

from hookgate.catalog.catalog import import_target
from hookgate.catalog.declarative.protocol import HookProtocolError, HookReply, reply_from_value
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookPoint

#: Keys a python hook entry takes besides the common ones.
KEYS = frozenset({"function"})
#: Threads for sync python hooks in this process, and how many of them one agent may hold.
POOL_SIZE = 32
PER_AGENT = 4


class SyncHookPool:
    """A bounded thread pool for sync hooks that refuses work instead of queueing it.

    Counts are of threads really busy (released when the function returns, not when its
    caller gave up), so hung hooks keep counting until they end.
    """

    def __init__(self, size: int = POOL_SIZE, per_agent: int = PER_AGENT) -> None:
        self.size = size
        self.per_agent = per_agent
        self._executor = ThreadPoolExecutor(size, thread_name_prefix="hookgate-python-hook")
        self._lock = threading.Lock()
        self._busy: Counter[str] = Counter()

    def busy(self, agent: str | None = None) -> int:
        with self._lock:
            return self._busy[agent or ""] if agent is not None else sum(self._busy.values())

    async def run(self, agent: str, function: Callable[[dict[str, Any]], Any],
                  payload: dict[str, Any]) -> Any:
        with self._lock:
            total = sum(self._busy.values())
            if total >= self.size:
                raise HookProtocolError(
                    f"all {self.size} threads for sync python hooks are busy (hung hooks "
                    "still running); the call fails closed")
            if self._busy[agent] >= self.per_agent:
                raise HookProtocolError(
                    f"agent '{agent}' already has {self.per_agent} sync python hooks "
                    "running (hung or slow); the call fails closed")
            self._busy[agent] += 1

        def call() -> Any:
            try:
                return function(payload)
            finally:
                with self._lock:
                    self._busy[agent] -= 1
                    if not self._busy[agent]:
                        del self._busy[agent]

        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, call)


#: The process's pool for sync python hooks.
SYNC_POOL = SyncHookPool()


@dataclass(frozen=True, slots=True)
class PythonCallable:
    """Calls ``function(payload)``; ``target`` is how it was declared."""

    kind: ClassVar[str] = "python"
    target: str
    function: Callable[[dict[str, Any]], Any]
    cwd: str | None = None

    @classmethod
    def from_declaration(cls, entry: Mapping[str, Any]) -> PythonCallable:
        target = entry.get("function")
        if not isinstance(target, str) or ":" not in target:
            raise HookBuildError("a python hook needs 'function', given as 'module:function'")
        try:
            function = import_target(target)
        except ImportError as exc:
            raise HookBuildError(f"'{target}' cannot be imported: {exc}") from None
        except Exception as exc:
            raise HookBuildError(
                f"importing '{target}' raised {type(exc).__name__}: {exc}"
            ) from None
        if isinstance(function, type):
            raise HookBuildError(
                f"'{target}' is a class; a hook class goes under class_hooks, a python hook "
                "names a function"
            )
        if not callable(function):
            raise HookBuildError(f"'{target}' is not callable")
        return cls(target, function)

    async def ask(self, payload: dict[str, Any], point: HookPoint) -> HookReply:
        if inspect.iscoroutinefunction(self.function):
            value = await self.function(payload)
        else:
            agent = str(payload.get("hookgate_agent_id") or "")
            value = await SYNC_POOL.run(agent, self.function, payload)
            if inspect.isawaitable(value):
                value = await value
        return reply_from_value(value)

    def describe(self) -> str:
        return f"function={self.target!r}"
