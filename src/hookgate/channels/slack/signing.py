"""Slack request signing (v0): HMAC-SHA256 over ``v0:<timestamp>:<raw body>``."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from hookgate.channels.base import CallbackRejected
from hookgate.channels.verification import check_fresh, secrets_equal


def signature(signing_secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Slack-Signature`` of a request with this raw body."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()


def verify(signing_secret: str, headers: Mapping[str, str], body: bytes, now: float) -> None:
    """Refuse (401) a request that is unsigned, signed wrongly or outside the window.

    ``headers`` have lower-case names.
    """
    given = headers.get("x-slack-signature")
    timestamp = headers.get("x-slack-request-timestamp")
    if not given or not timestamp:
        raise CallbackRejected(401, "request without X-Slack-Signature/-Request-Timestamp")
    if not secrets_equal(given, signature(signing_secret, timestamp, body)):
        raise CallbackRejected(401, "X-Slack-Signature does not match")
    check_fresh(timestamp, now, source="X-Slack-Request-Timestamp")
