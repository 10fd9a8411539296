"""Feishu's callback crypto: the ``{"encrypt": ...}`` envelope and the request signature.

Envelope: base64(iv16 ‖ AES-256-CBC(key=SHA256(encrypt_key), pkcs7_16(json))).
Signature: hex(SHA256((timestamp + nonce + encrypt_key) + raw_body)), a plain hash, not HMAC.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


class FeishuCryptoError(ValueError):
    """The envelope cannot be decrypted with this encrypt key."""


def _key(encrypt_key: str) -> bytes:
    return hashlib.sha256(encrypt_key.encode("utf-8")).digest()


def decrypt(encrypted: str, encrypt_key: str) -> bytes:
    """The plaintext (event JSON bytes) inside an ``encrypt`` value."""
    try:
        raw = base64.b64decode(encrypted, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise FeishuCryptoError("the encrypt value is not base64") from exc
    if len(raw) < 32 or len(raw) % 16:
        raise FeishuCryptoError("the encrypt value is not IV plus whole AES blocks")
    iv, ciphertext = raw[:16], raw[16:]
    decryptor = Cipher(algorithms.AES(_key(encrypt_key)), modes.CBC(iv)).decryptor()
    padded = decryptor.update(ciphertext) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    try:
        return unpadder.update(padded) + unpadder.finalize()
    except ValueError as exc:
        raise FeishuCryptoError("bad padding: wrong encrypt key or damaged body") from exc


def encrypt(plaintext: bytes, encrypt_key: str, iv: bytes | None = None) -> str:
    """The ``encrypt`` value Feishu would send for ``plaintext`` (random IV unless given)."""
    iv = os.urandom(16) if iv is None else iv
    padder = padding.PKCS7(128).padder()
    padded = padder.update(plaintext) + padder.finalize()
    encryptor = Cipher(algorithms.AES(_key(encrypt_key)), modes.CBC(iv)).encryptor()
    return base64.b64encode(iv + encryptor.update(padded) + encryptor.finalize()).decode()


def signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    """The ``X-Lark-Signature`` of a callback with this raw body."""
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode("utf-8") + body).hexdigest()
