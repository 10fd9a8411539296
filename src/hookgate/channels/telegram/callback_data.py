"""The ``callback_data`` of an approval button: a short opaque key, never the call's content.

Telegram gives a button at most 64 bytes of ``callback_data`` and a modified client can send
any bytes it likes, so the key is ``<a|r>.<request id>.<tag>``: the decision, the request's
random id (looked up in the database, which holds the call) and an HMAC tag binding both to
this channel under its webhook secret. A key the channel did not issue is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from hookgate.channels.base import CallbackRejected

MAX_BYTES = 64
DECISIONS = {"a": "approve", "r": "reject"}
_LETTERS = {decision: letter for letter, decision in DECISIONS.items()}
TAG_BYTES = 12


class CallbackDataTooLong(ValueError):
    """The request id leaves no room for the key within Telegram's 64 bytes."""


def _tag(secret: str, channel_id: str, request_id: str, letter: str) -> str:
    message = f"hookgate-telegram:{channel_id}:{request_id}:{letter}".encode()
    digest = hmac.new(secret.encode(), message, hashlib.sha256).digest()[:TAG_BYTES]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def encode(secret: str, channel_id: str, request_id: str, decision: str) -> str:
    """The button's callback_data; CallbackDataTooLong past 64 bytes."""
    letter = _LETTERS[decision]
    data = f"{letter}.{request_id}.{_tag(secret, channel_id, request_id, letter)}"
    if len(data.encode()) > MAX_BYTES:
        raise CallbackDataTooLong(
            f"telegram: request id {request_id!r} does not fit a {MAX_BYTES}-byte callback_data")
    return data


def decode(secret: str, channel_id: str, data: str) -> tuple[str, str]:
    """(request id, decision) of a key this channel issued; CallbackRejected(401) otherwise."""
    letter, _, rest = data.partition(".")
    request_id, _, tag = rest.rpartition(".")
    if letter not in DECISIONS or not request_id or not tag:
        raise CallbackRejected(401, "callback_data is not an approval key of this channel")
    if not hmac.compare_digest(tag, _tag(secret, channel_id, request_id, letter)):
        raise CallbackRejected(401, "callback_data was not issued by this channel")
    return request_id, DECISIONS[letter]
