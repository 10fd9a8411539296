"""A platform access token, fetched once and reused until shortly before it expires.

Platforms throttle token requests and may revoke a token early, so a call that is told its
token is invalid drops it, fetches a fresh one and tries once more.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from hookgate.channels.delivery import Clock

T = TypeVar("T")

#: Fetch a new token: returns (token, lifetime in seconds).
FetchToken = Callable[[], Awaitable[tuple[str, float]]]


class AccessTokenCache:
    def __init__(self, fetch: FetchToken, *, margin: float, clock: Clock = time.monotonic) -> None:
        self._fetch = fetch
        self._margin = margin
        self._clock = clock
        self._token: str | None = None
        self._fresh_until = 0.0
        self._lock = asyncio.Lock()

    async def get(self) -> str:
        async with self._lock:  # concurrent sends share one fetch
            if self._token is None or self._clock() >= self._fresh_until:
                token, lifetime = await self._fetch()
                self._token = token
                self._fresh_until = self._clock() + max(0.0, lifetime - self._margin)
            return self._token

    def invalidate(self, token: str) -> None:
        """Forget ``token`` (if it is still the cached one) so the next get() fetches."""
        if self._token == token:
            self._token = None

    async def call(
        self,
        attempt: Callable[[str], Awaitable[T]],
        token_rejected: Callable[[T], bool],
    ) -> T:
        """Run ``attempt`` with the token; if the platform rejects the token, refresh once."""
        token = await self.get()
        result = await attempt(token)
        if not token_rejected(result):
            return result
        self.invalidate(token)
        return await attempt(await self.get())
