"""Expiry jobs are grouped by tick: a request ends at most one tick after it expired, never
before, and requests expiring within one tick share one scheduled job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hookgate.runs.executors.queue import expiry_tick


def test_a_tick_never_comes_before_the_expiry_nor_more_than_one_tick_after() -> None:
    base = datetime(2026, 12, 1, 13, 0, 0, tzinfo=UTC)
    for ms in (0, 1, 999, 4_999, 5_000, 5_001, 123_456):
        expires = base + timedelta(milliseconds=ms)
        due = expiry_tick(expires, 5.0)
        assert expires <= due < expires + timedelta(seconds=5)
        assert due.timestamp() % 5 == 0


def test_requests_expiring_within_one_tick_share_it_and_the_next_one_does_not() -> None:
    base = datetime(2026, 12, 1, 13, 0, 1, tzinfo=UTC)
    ticks = {expiry_tick(base + timedelta(milliseconds=ms), 5.0) for ms in range(0, 3_999, 7)}
    assert len(ticks) == 1
    assert expiry_tick(base + timedelta(seconds=4.5), 5.0) > ticks.pop()
    # An hour of requests, however many, needs at most 3600 / 5 jobs.
    hour = {expiry_tick(base + timedelta(seconds=s / 10), 5.0) for s in range(36_000)}
    assert len(hour) <= 721
