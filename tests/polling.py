"""Waiting in a test for something another process or thread does: read until it is so."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(fn: Callable[[], T], what: str, timeout: float = 30, *,
             every: float = 0.1) -> T:
    """``fn()``'s value once it is true, read every ``every`` seconds; after ``timeout``
    seconds an AssertionError naming ``what`` (an ``fn`` that asks a server should use
    tests.loopback_http.HTTP: a new httpx client per read costs ~25 ms of CPU)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")
