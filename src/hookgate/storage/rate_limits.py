"""Rate-limit counters shared by every process: fixed windows in the database, or in Redis.

A counter is a key (connector and who calls) with a window start and a count. Taking a slot
is one atomic statement — "start a new window at 1, or add 1 if still under the limit" — so
concurrent callers in any number of processes get exactly ``limit`` slots per window.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from dataclasses import dataclass
from typing import Any, Protocol

from hookgate.storage.database import Database


@dataclass(frozen=True, slots=True)
class Slot:
    """The answer to "may one more call go?"; ``retry_after`` seconds when it may not."""

    allowed: bool
    retry_after: float = 0.0


class RateCounter(Protocol):
    async def take(self, key: str, limit: int, window_s: int, now: float) -> Slot:
        """Count one call against ``key`` if it is under ``limit`` in the current window."""
        ...


def window_start(now: float, window_s: int) -> int:
    """Fixed windows aligned to the epoch, so every process computes the same ones."""
    return math.floor(now / window_s) * window_s


def _refused(start: int, window_s: int, now: float) -> Slot:
    return Slot(False, max(0.0, start + window_s - now))


class DatabaseRateCounter:
    """Counters in ``rate_limit_counters``: one row per key, updated in one statement (on
    SQLite and PostgreSQL alike: start a new window at 1, or add 1 while under the limit;
    storage/backends/statements.py)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def take(self, key: str, limit: int, window_s: int, now: float) -> Slot:
        start = window_start(now, window_s)
        if await self.db.backend.take_rate_slot(key, start, limit):
            return Slot(True)
        return _refused(start, window_s, now)


class RedisRateCounter:
    """Counters in Redis (``pip install 'hookgate[redis]'``): INCR on a key per window,
    which expires with the window. One client per URL per event loop, made on first use."""

    _clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Any]] = (
        weakref.WeakKeyDictionary())

    def __init__(self, url: str, *, prefix: str = "hookgate:rate:") -> None:
        try:
            import redis.asyncio  # noqa: F401  (fail at build time, not on the first call)
        except ImportError as exc:
            raise ImportError(
                "a redis_url needs the redis package: pip install 'hookgate[redis]'") from exc
        self.url = url
        self.prefix = prefix

    def _client(self) -> Any:
        import redis.asyncio as redis_asyncio

        per_loop = self._clients.setdefault(asyncio.get_running_loop(), {})
        client = per_loop.get(self.url)
        if client is None:
            client = per_loop[self.url] = redis_asyncio.from_url(self.url)
        return client

    async def take(self, key: str, limit: int, window_s: int, now: float) -> Slot:
        start = window_start(now, window_s)
        name = f"{self.prefix}{key}:{start}"
        async with self._client().pipeline(transaction=True) as pipe:
            pipe.incr(name)
            pipe.expire(name, window_s + 1)
            count, _ = await pipe.execute()
        return Slot(True) if int(count) <= limit else _refused(start, window_s, now)
