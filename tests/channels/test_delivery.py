"""The platform sender's retry rules, over real HTTP to a fake platform.

Sleeping is recorded instead of waited where the test is about *how long* the sender
waits; the channel tests wait for real with small delays.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest

from hookgate.channels.base import DeliveryError
from hookgate.channels.delivery import PlatformSender, RetryPolicy
from tests.fakes.feishu import FakeFeishu

PATH = "/open-apis/auth/v3/tenant_access_token/internal"


class Sleeps:
    """Records the waits, and advances a fake clock by them."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self.now = 0.0

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def sender(feishu: FakeFeishu, sleeps: Sleeps) -> AsyncIterator[PlatformSender]:
    s = PlatformSender("feishu", feishu.url, sleep=sleeps, clock=sleeps.clock,
                       policy=RetryPolicy(max_attempts=4, base_delay=1, max_delay=30,
                                          total_timeout=60))
    yield s
    await s.aclose()


async def token_request(sender: PlatformSender, feishu: FakeFeishu) -> int:
    response = await sender.request("POST", PATH, json={"app_id": feishu.app_id,
                                                        "app_secret": feishu.app_secret})
    return response.status_code


async def test_retry_after_and_feishus_reset_header_set_the_wait(
    feishu: FakeFeishu, sender: PlatformSender, sleeps: Sleeps
) -> None:
    feishu.fail_next(PATH, status=429, headers={"Retry-After": "7"})
    feishu.fail_next(PATH, status=429, headers={"x-ogw-ratelimit-reset": "52"})
    assert await token_request(sender, feishu) == 200
    assert sleeps.waits == [7.0, 52.0]


async def test_without_a_header_the_wait_doubles(
    feishu: FakeFeishu, sender: PlatformSender, sleeps: Sleeps
) -> None:
    feishu.fail_next(PATH, status=500, times=3)
    assert await token_request(sender, feishu) == 200
    assert sleeps.waits == [1.0, 2.0, 4.0]
    assert len(feishu.requests_to(PATH)) == 4


async def test_an_http_date_retry_after_falls_back_to_backoff(
    feishu: FakeFeishu, sender: PlatformSender, sleeps: Sleeps
) -> None:
    feishu.fail_next(PATH, status=503, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})
    assert await token_request(sender, feishu) == 200
    assert sleeps.waits == [1.0]


async def test_client_errors_are_returned_not_retried(
    feishu: FakeFeishu, sender: PlatformSender, sleeps: Sleeps
) -> None:
    feishu.fail_next(PATH, status=403, json_body={"code": 1})
    assert await token_request(sender, feishu) == 403
    assert sleeps.waits == []


async def test_it_gives_up_after_the_attempt_limit_with_the_last_answer(
    feishu: FakeFeishu, sender: PlatformSender, sleeps: Sleeps
) -> None:
    feishu.fail_next(PATH, status=502, json_body={"msg": "bad gateway"}, times=10)
    with pytest.raises(DeliveryError, match="4 attempts failed") as caught:
        await token_request(sender, feishu)
    assert (caught.value.platform, caught.value.endpoint, caught.value.status) == (
        "feishu", f"POST {PATH}", 502
    )
    assert "bad gateway" in (caught.value.body or "")
    assert len(sleeps.waits) == 3


async def test_it_gives_up_at_once_when_asked_to_wait_past_the_time_limit(
    feishu: FakeFeishu, sender: PlatformSender, sleeps: Sleeps
) -> None:
    feishu.fail_next(PATH, status=429, headers={"Retry-After": "3600"})
    with pytest.raises(DeliveryError, match=r"in 3600 s.*60 s limit") as caught:
        await token_request(sender, feishu)
    assert caught.value.status == 429
    assert sleeps.waits == []


async def test_transport_errors_are_retried_then_reported(sleeps: Sleeps) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    sender = PlatformSender("slack", closed, sleep=sleeps, clock=sleeps.clock,
                            policy=RetryPolicy(max_attempts=3, base_delay=0.5))
    try:
        with pytest.raises(DeliveryError, match="ConnectError") as caught:
            await sender.request("POST", "chat.postMessage", json={})
    finally:
        await sender.aclose()
    assert caught.value.status is None
    assert sleeps.waits == [0.5, 1.0]
