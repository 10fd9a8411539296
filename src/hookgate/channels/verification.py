"""Checks every platform's callback shares: a bounded body and a fresh timestamp.

A signature proves who sent a request, not when: a captured request replayed hours later
verifies just as well, so each channel also refuses timestamps outside a ±5-minute window.
Replays inside the window are caught by the caller's dedupe keys.
"""

from __future__ import annotations

import hmac

from hookgate.channels.base import CallbackRejected, CallbackRequest

MAX_CALLBACK_BYTES = 256 * 1024
TIMESTAMP_WINDOW_SECONDS = 300


def check_size(request: CallbackRequest) -> None:
    if len(request.body) > MAX_CALLBACK_BYTES:
        raise CallbackRejected(400, f"callback body larger than {MAX_CALLBACK_BYTES} bytes")


def check_fresh(timestamp: str | None, now: float, *, source: str) -> None:
    """Refuse (401) a missing, malformed or out-of-window unix-seconds ``timestamp``."""
    if not timestamp:
        raise CallbackRejected(401, f"no timestamp in {source}")
    try:
        seconds = int(timestamp)
    except ValueError:
        raise CallbackRejected(401, f"timestamp in {source} is not unix seconds") from None
    if abs(now - seconds) > TIMESTAMP_WINDOW_SECONDS:
        raise CallbackRejected(
            401, f"stale timestamp in {source}: {int(now - seconds)} s from now"
        )


def secrets_equal(given: str | None, expected: str) -> bool:
    """Constant-time comparison, so timing does not reveal how much of a secret matched."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())
