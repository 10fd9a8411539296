"""The one retry policy's hot-path form: a first try without tenacity, and a failure that
enters the retrier as its first attempt, so tries, pauses and errors stay what they were."""

from __future__ import annotations

import asyncio

import pytest
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from hookgate.retries import first_then_retrying, pauses, retrying


class Flaky(Exception):
    pass


class Refused(Exception):
    pass


def recorder() -> tuple[list[float], object]:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    return slept, sleep


async def test_a_first_try_that_succeeds_builds_no_retrier() -> None:
    built = []

    def make() -> AsyncRetrying:
        built.append(1)
        return retrying(wait=pauses(lambda: (0.1,)))

    async def ok() -> str:
        return "written"

    assert await first_then_retrying(make, ok) == "written"
    assert built == []


@pytest.mark.parametrize("failures", [1, 2])
async def test_failures_are_tried_again_with_the_same_tries_and_pauses(failures: int) -> None:
    slept, sleep = recorder()
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls <= failures:
            raise Flaky(f"attempt {calls}")
        return "written"

    def make() -> AsyncRetrying:
        return retrying(wait=pauses(lambda: (0.1, 0.5)), stop=stop_after_attempt(3),
                        sleep=sleep)  # type: ignore[arg-type]

    assert await first_then_retrying(make, flaky) == "written"
    assert calls == failures + 1
    assert slept == [0.1, 0.5][:failures]


async def test_giving_up_raises_the_last_error_after_every_try() -> None:
    slept, sleep = recorder()
    calls = 0

    async def down() -> None:
        nonlocal calls
        calls += 1
        raise Flaky(f"attempt {calls}")

    def make() -> AsyncRetrying:
        return retrying(wait=pauses(lambda: (0.1, 0.5)), stop=stop_after_attempt(3),
                        sleep=sleep)  # type: ignore[arg-type]

    with pytest.raises(Flaky, match="attempt 3"):
        await first_then_retrying(make, down)
    assert calls == 3
    assert slept == [0.1, 0.5]


async def test_what_is_not_retried_goes_out_after_one_try() -> None:
    calls = 0

    async def refused() -> None:
        nonlocal calls
        calls += 1
        raise Refused("fenced")

    def make() -> AsyncRetrying:
        return retrying(wait=pauses(lambda: (0.1,)), stop=stop_after_attempt(3),
                        retry=retry_if_exception_type(Flaky))

    with pytest.raises(Refused):
        await first_then_retrying(make, refused)
    assert calls == 1


async def test_a_cancellation_is_never_retried() -> None:
    calls = 0

    async def cancelled() -> None:
        nonlocal calls
        calls += 1
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await first_then_retrying(lambda: retrying(wait=pauses(lambda: (0.1,))), cancelled)
    assert calls == 1
