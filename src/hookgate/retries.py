"""The one retry policy: every place hookgate tries something again does it with tenacity,
through the few shapes here (a fixed list of pauses, doubling pauses, a warning per retry).

Imports nothing of hookgate. Only ``Exception`` is ever retried: a cancelled task (and any
other BaseException) goes straight out, whatever the caller's ``retry`` says.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_never
from tenacity.retry import retry_base
from tenacity.stop import stop_base
from tenacity.wait import wait_base, wait_exponential

__all__ = ["RetryCallState", "doubling", "first_then_retrying", "pauses", "retrying", "stop_when",
           "wait_from", "warn_before_retry"]

Sleep = Callable[[float], Awaitable[None]]
T = TypeVar("T")


class pauses(wait_base):
    """The n-th failure is followed by the n-th pause of ``seconds`` (the last one after
    that); a module's tuple is read at each wait, so a test may shorten it."""

    def __init__(self, seconds: Callable[[], Sequence[float]]) -> None:
        self.seconds = seconds

    def __call__(self, retry_state: RetryCallState) -> float:
        seconds = self.seconds()
        return float(seconds[min(retry_state.attempt_number, len(seconds)) - 1])


class wait_from(wait_base):
    """The pause ``pause(state)`` says (one that depends on the answer, say)."""

    def __init__(self, pause: Callable[[RetryCallState], float]) -> None:
        self.pause = pause

    def __call__(self, retry_state: RetryCallState) -> float:
        return self.pause(retry_state)


class stop_when(stop_base):
    """Give up when ``condition(state)`` holds (it may read ``state.upcoming_sleep``)."""

    def __init__(self, condition: Callable[[RetryCallState], bool]) -> None:
        self.condition = condition

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.condition(retry_state)


def doubling(first: float, ceiling: float) -> wait_base:
    """``first`` after the first failure, then twice the last pause, up to ``ceiling``."""
    return wait_exponential(multiplier=first, exp_base=2, max=ceiling)


def warn_before_retry(log: logging.Logger, what: Callable[[RetryCallState], str], *,
                      exc_info: bool = False) -> Callable[[RetryCallState], None]:
    """A ``before_sleep`` that logs ``what(state)``, the error and the pause, as a warning."""

    def warn(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        failed = f"{type(error).__name__}: {error}" if error is not None else "no result"
        log.warning("%s failed (%s); trying again in %.1fs", what(state), failed,
                    state.upcoming_sleep, exc_info=error if exc_info else None)

    return warn


def retrying(*, wait: wait_base, stop: stop_base = stop_never,
             retry: retry_base | None = None, before_sleep: Any = None,
             retry_error_callback: Any = None, sleep: Sleep = asyncio.sleep) -> AsyncRetrying:
    """A tenacity retrier that re-raises the last error when it gives up (never a
    RetryError) and never retries what is not an ``Exception``."""
    chosen = retry_if_exception_type(Exception) if retry is None else _NotBase() & retry
    return AsyncRetrying(
        wait=wait, stop=stop, sleep=sleep, reraise=True, before_sleep=before_sleep,
        retry=chosen, retry_error_callback=retry_error_callback)


class _NotBase(retry_base):
    """False for an outcome that is a BaseException but no Exception (a cancellation)."""

    def __call__(self, retry_state: RetryCallState) -> bool:
        outcome = retry_state.outcome
        return not (outcome is not None and outcome.failed
                    and not isinstance(outcome.exception(), Exception))


async def first_then_retrying(make: Callable[[], AsyncRetrying],
                             fn: Callable[[], Awaitable[T]]) -> T:
    """``fn()`` under the retrier ``make()`` builds, for the hot paths: the first try runs
    without tenacity (a retrier costs about 70 us a call, built or not, where the write it
    guards costs less), and only a failure builds the retrier, which takes that failure as
    its first attempt. Tries, pauses, what is retried and what is raised stay the same."""
    try:
        return await fn()
    except Exception as exc:
        first: Exception | None = exc

    async def replay_then_call() -> T:
        nonlocal first
        if first is not None:
            failed, first = first, None
            raise failed
        return await fn()

    result: T = await make()(replay_then_call)
    return result

