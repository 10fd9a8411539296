"""Discord's interaction signatures: Ed25519 over ``timestamp + raw body`` with the
application's public key (``X-Signature-Ed25519``, ``X-Signature-Timestamp``)."""

from __future__ import annotations

from collections.abc import Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from hookgate.channels.base import CallbackRejected
from hookgate.channels.verification import check_fresh


def verify(public_key: str, headers: Mapping[str, str], body: bytes, now: float) -> None:
    """Refuse (401) an interaction unsigned, signed wrongly or outside the time window.

    ``headers`` have lower-case names.
    """
    signature = headers.get("x-signature-ed25519")
    timestamp = headers.get("x-signature-timestamp")
    if not signature or not timestamp:
        raise CallbackRejected(401, "interaction without X-Signature-Ed25519/-Timestamp")
    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key)).verify(
            bytes.fromhex(signature), timestamp.encode() + body)
    except (InvalidSignature, ValueError):
        raise CallbackRejected(401, "invalid request signature") from None
    check_fresh(timestamp, now, source="X-Signature-Timestamp")
