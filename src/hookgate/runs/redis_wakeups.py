"""Wake-ups through Redis pub/sub (``redis_url``), instead of PostgreSQL LISTEN/NOTIFY.

Run events and inbox changes are still read from the database; Redis carries only the
"read again" signal, published once the writing transaction committed. While Redis is away
nothing fails: publishing logs and gives up, followers re-read the log on their periodic
re-check and everyone re-reads once the subscription is back, so a stream lags but
neither misses an event nor hangs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from hookgate.runs.notifications import WARN_EVERY_S, Subscription

log = logging.getLogger(__name__)

#: Prefix of hookgate's channels on a Redis shared with other applications.
PREFIX = "hookgate:"
#: Longest single wait for a message (a dropped connection shows within the socket timeout).
LISTEN_WAIT_S = 1.0


def _redis() -> Any:
    try:
        import redis.asyncio as redis_asyncio
    except ImportError as exc:
        raise ImportError("redis_url needs the redis package: "
                          "pip install 'hookgate[redis]'") from exc
    return redis_asyncio


class RedisWakeups(Subscription):
    """Subscribes to hookgate's channels on Redis and publishes to them."""

    kind = "Redis"

    def __init__(self, url: str, *, retry_s: float = 1.0, timeout_s: float = 2.0) -> None:
        super().__init__(retry_s=retry_s)
        self.url = url
        self._client = _redis().from_url(url, socket_timeout=timeout_s,
                                         socket_connect_timeout=timeout_s)

    async def publish(self, notes: Sequence[tuple[str, str]]) -> None:
        """Publish committed changes; never raises (see the module docstring)."""
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for channel, payload in notes:
                    pipe.publish(PREFIX + channel, payload)
                await pipe.execute()
        except Exception as exc:
            now = time.monotonic()
            if now - self._warned_at >= WARN_EVERY_S:  # shared with the subscription's
                self._warned_at = now
                log.warning("publishing wake-ups to Redis failed (%s: %s); streams on other "
                            "instances fall back to re-reading the database periodically",
                            type(exc).__name__, exc)

    async def _listen(self) -> AsyncIterator[None]:
        pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(*(PREFIX + c for c in self._handlers))
            yield None
            while True:
                # Bounded waits (shorter than the socket timeout, which would otherwise
                # read a quiet channel as a dead connection).
                message = await pubsub.get_message(timeout=LISTEN_WAIT_S)
                if message is None or message.get("type") != "message":
                    continue
                channel, data = message["channel"], message["data"]
                channel = channel.decode() if isinstance(channel, bytes) else str(channel)
                payload = data.decode() if isinstance(data, bytes) else str(data)
                self._dispatch(channel.removeprefix(PREFIX), payload)
        finally:
            await pubsub.aclose()

    async def stop(self) -> None:
        await super().stop()
        await self._client.aclose()
