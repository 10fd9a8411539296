"""A few seconds' memory of bearer-token lookups, so a client's burst of requests costs one
database read instead of one per request.

Only tokens that *were* valid are remembered, keyed by their sha256 (never the token
itself), for ``TTL_S`` seconds from the lookup: a token revoked, expired or re-assigned in
the database stops working in this process within that time, and a new token works at once.
The memory is bounded; when full, the oldest entries go first.

Concurrent requests with the same token share one lookup: when an entry expires under a
burst (64 clients at once), one database read answers them all instead of one read each. A
lookup that fails fails every request waiting on it (nothing is remembered), and one request
giving up (its client gone) does not cancel the lookup for the others. ``clear()`` also
drops the lookups in flight: a lookup started before a revocation is neither joined nor
remembered after it.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")

#: How long a successful lookup is reused. Revocation takes effect within this time.
TTL_S = 2.0
MAX_ENTRIES = 4096


def _retrieve(task: asyncio.Task[object]) -> None:
    if not task.cancelled():
        task.exception()


def token_key(token: str) -> str:
    """The key a token is remembered under: its sha256 (the token itself is never kept)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class TokenCache(Generic[T]):
    """Successful lookups of one process's server, for ``TTL_S`` seconds each."""

    def __init__(self, ttl_s: float | None = None, max_entries: int = MAX_ENTRIES) -> None:
        self.ttl_s = TTL_S if ttl_s is None else ttl_s
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[float, T]] = OrderedDict()
        #: Lookups in flight, by key: later requests with the same token wait on them.
        self._flights: dict[str, asyncio.Task[T | None]] = {}
        #: Raised by clear(): a lookup started before it is not remembered.
        self._generation = 0

    async def lookup(self, token: str, load: Callable[[str], Awaitable[T | None]],
                     key: str | None = None) -> T | None:
        """The remembered answer for ``token`` while fresh, else ``load(token)``'s (``key``:
        the token's `token_key`, when the caller has made it already)."""
        if key is None:
            key = token_key(token)
        now = time.monotonic()
        hit = self._entries.get(key)
        if hit is not None:
            if hit[0] > now:
                return hit[1]
            del self._entries[key]
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(self._load(key, token, load, self._generation, now))
            flight.add_done_callback(_retrieve)  # every waiter may have gone
            self._flights[key] = flight
        # Shielded: a request cancelled while waiting leaves the lookup to the others.
        return await asyncio.shield(flight)

    def fresh(self, key: str) -> T | None:
        """The remembered answer under ``key`` (`token_key`) while fresh, else None; never
        loads (for a caller that asks often, such as a stream before each event)."""
        hit = self._entries.get(key)
        return hit[1] if hit is not None and hit[0] > time.monotonic() else None

    async def _load(self, key: str, token: str, load: Callable[[str], Awaitable[T | None]],
                    generation: int, started: float) -> T | None:
        try:
            value = await load(token)
        finally:
            if self._flights.get(key) is asyncio.current_task():
                del self._flights[key]
        if value is not None and self.ttl_s > 0 and generation == self._generation:
            self._entries[key] = (started + self.ttl_s, value)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        """Forget every lookup, those in flight included (e.g. right after revoking tokens in
        this process)."""
        self._entries.clear()
        self._flights.clear()
        self._generation += 1
