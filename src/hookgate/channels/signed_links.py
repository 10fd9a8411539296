"""Signed, single-use, expiring decision tokens for channels whose clicks are plain HTTP
requests from somewhere we do not control (an email link, a phone's notification button).

A token names the channel, the request, the decision, the recipient it was sent to, when it
expires and a random nonce, and carries an HMAC-SHA256 tag under the channel's
``link_secret``. It holds no part of the call. The nonce is the dedupe key, so a token
decides at most once; the decision owner refuses anything a used token could still ask.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Literal

from hookgate.channels.base import CallbackRejected

MIN_SECRET_CHARS = 32
_DECISIONS: dict[str, Literal["approve", "reject"]] = {"a": "approve", "r": "reject"}


@dataclass(frozen=True, slots=True)
class LinkClaims:
    request_id: str
    decision: Literal["approve", "reject"]
    recipient: str
    expires_at: int
    nonce: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _tag(secret: str, payload: str) -> str:
    return _b64(hmac.new(secret.encode(), f"hookgate-link:{payload}".encode(),
                         hashlib.sha256).digest())


def mint(secret: str, channel_id: str, request_id: str, decision: str, recipient: str,
         expires_at: int) -> str:
    claims = {"c": channel_id, "r": request_id, "d": decision[0], "u": recipient,
              "x": expires_at, "n": secrets.token_hex(12)}
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    return f"{payload}.{_tag(secret, payload)}"


def read(secret: str, channel_id: str, token: str | None, now: float) -> LinkClaims:
    """The claims of a token this channel issued that has not expired; CallbackRejected
    (401) for a forged, foreign or expired one, (400) for one that is not a token."""
    if not token:
        raise CallbackRejected(400, "no decision token")
    payload, _, tag = token.partition(".")
    if not payload or not tag:
        raise CallbackRejected(400, "not a decision token")
    if not hmac.compare_digest(tag, _tag(secret, payload)):
        raise CallbackRejected(401, "decision token was not issued by this channel")
    try:
        claims = json.loads(_unb64(payload))
        decision = _DECISIONS[claims["d"]]
        parsed = LinkClaims(str(claims["r"]), decision, str(claims["u"]), int(claims["x"]),
                            str(claims["n"]))
        issued_for = claims["c"]
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise CallbackRejected(400, "unreadable decision token") from None
    if issued_for != channel_id:
        raise CallbackRejected(401, "decision token was issued for another channel")
    if now > parsed.expires_at:
        raise CallbackRejected(401, "decision token expired")
    return parsed
