"""A few seconds' memory of bearer-token lookups, so a client's burst of requests costs one
database read instead of one per request.

Only tokens that *were* valid are remembered, keyed by their sha256 (never the token
itself), for ``TTL_S`` seconds from the lookup: a token revoked, expired or re-assigned in
the database stops working in this process within that time, and a new token works at once.
The memory is bounded; when full, the oldest entries go first.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")

#: How long a successful lookup is reused. Revocation takes effect within this time.
TTL_S = 2.0
MAX_ENTRIES = 4096


class TokenCache(Generic[T]):
    """Successful lookups of one process's server, for ``TTL_S`` seconds each."""

    def __init__(self, ttl_s: float | None = None, max_entries: int = MAX_ENTRIES) -> None:
        self.ttl_s = TTL_S if ttl_s is None else ttl_s
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[float, T]] = OrderedDict()

    async def lookup(self, token: str, load: Callable[[str], Awaitable[T | None]]) -> T | None:
        """The remembered answer for ``token`` while fresh, else ``load(token)``'s."""
        key = hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
        now = time.monotonic()
        hit = self._entries.get(key)
        if hit is not None:
            if hit[0] > now:
                return hit[1]
            del self._entries[key]
        value = await load(token)
        if value is not None and self.ttl_s > 0:
            self._entries[key] = (now + self.ttl_s, value)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        """Forget every lookup (e.g. right after revoking tokens in this process)."""
        self._entries.clear()
