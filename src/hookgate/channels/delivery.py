"""Sending to a chat platform's API with bounded retries.

Rate limits (429, or a platform's own "slow down" answer), 5xx and transport errors are
retried with exponential backoff, waiting as long as the platform asks (``Retry-After``,
Feishu's ``x-ogw-ratelimit-reset``); attempts and total time are bounded, and giving up
raises DeliveryError naming the platform, the endpoint and the last answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx
from tenacity import retry_if_exception_type, retry_if_result, stop_after_attempt

from hookgate.channels.base import DeliveryError
from hookgate.channels.retry_policy import RetryPolicy as RetryPolicy  # named here too
from hookgate.retries import RetryCallState, retrying, stop_when, wait_from
from hookgate.telemetry.channels import delivery_failed
from hookgate.tls import client_context

#: Headers that say how many seconds to wait before retrying, in order of preference.
RETRY_AFTER_HEADERS = ("retry-after", "x-ogw-ratelimit-reset")

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]
#: Whether a non-5xx, non-429 answer still means "rate limited, retry later".
RateLimitedBody = Callable[[httpx.Response], bool]


def _failed(state: RetryCallState) -> bool:
    return state.outcome is None or state.outcome.failed


def _answer(state: RetryCallState) -> httpx.Response:
    assert state.outcome is not None
    answer: httpx.Response = state.outcome.result()
    return answer


def requested_delay(response: httpx.Response) -> float | None:
    """The seconds the platform asked us to wait, if it said."""
    for name in RETRY_AFTER_HEADERS:
        raw = response.headers.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw.strip())
        except ValueError:
            continue  # an HTTP date or garbage: fall back to our own backoff
        return max(0.0, seconds)
    return None


class PlatformSender:
    """An HTTP client for one platform that retries what is worth retrying."""

    def __init__(
        self,
        platform: str,
        base_url: str,
        *,
        policy: RetryPolicy | None = None,
        rate_limited_body: RateLimitedBody | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.monotonic,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.platform = platform
        self.policy = policy or RetryPolicy()
        self._rate_limited_body = rate_limited_body
        self._sleep = sleep
        self._clock = clock
        self._client = httpx.AsyncClient(
            base_url=base_url, timeout=self.policy.request_timeout, transport=transport,
            verify=client_context(),
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json: Any = None,
        data: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """The first answer that is not worth retrying (which may still be a 4xx). ``data``
        is sent as a form (an OAuth token request), ``json`` as JSON."""
        endpoint = f"{method} {path}"
        policy = self.policy
        deadline = self._clock() + policy.total_timeout

        def pause(state: RetryCallState) -> float:
            asked = None if _failed(state) else requested_delay(_answer(state))
            return policy.backoff(state.attempt_number) if asked is None else asked

        def past_deadline(state: RetryCallState) -> bool:
            return self._clock() + state.upcoming_sleep > deadline

        def give_up(state: RetryCallState) -> httpx.Response:
            if _failed(state):
                error = state.outcome.exception() if state.outcome else None
                status, body = None, f"{type(error).__name__}: {error}"
            else:
                answer = _answer(state)
                status, body = answer.status_code, answer.text[:500]
            if state.attempt_number >= policy.max_attempts:
                why = f"{policy.max_attempts} attempts failed"
            else:
                why = (f"the next retry (in {state.upcoming_sleep:g} s) would pass the "
                       f"{policy.total_timeout:g} s limit")
            raise self._gave_up(endpoint, status, body, why)

        attempts = retrying(
            wait=wait_from(pause),
            stop=stop_after_attempt(policy.max_attempts) | stop_when(past_deadline),
            retry=retry_if_exception_type(httpx.TransportError)
            | retry_if_result(self._worth_retrying),
            retry_error_callback=give_up, sleep=self._sleep)
        response: httpx.Response = await attempts(
            self._client.request, method, path, params=params, json=json, data=data,
            headers=headers)
        return response

    def _worth_retrying(self, response: httpx.Response) -> bool:
        if response.status_code == 429 or response.status_code >= 500:
            return True
        return self._rate_limited_body is not None and self._rate_limited_body(response)

    def _gave_up(
        self, endpoint: str, status: int | None, body: str, why: str
    ) -> DeliveryError:
        last = f"HTTP {status}" if status is not None else "no answer"
        delivery_failed(self.platform, status)
        return DeliveryError(
            f"{self.platform}: {endpoint} failed, giving up: {why}; last: {last} {body}".rstrip(),
            platform=self.platform,
            endpoint=endpoint,
            status=status,
            body=body,
        )

    def refused(self, method: str, path: str, response: httpx.Response, why: str) -> DeliveryError:
        """A DeliveryError for an answer that came back but is not a success."""
        body = response.text[:500]
        delivery_failed(self.platform, response.status_code)
        return DeliveryError(
            f"{self.platform}: {method} {path} was refused: {why} (HTTP {response.status_code})",
            platform=self.platform,
            endpoint=f"{method} {path}",
            status=response.status_code,
            body=body,
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def json_body(response: httpx.Response) -> dict[str, Any]:
    """The response's JSON object, or an empty dict when it is not one."""
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
