"""WeCom's callback crypto (the official WXBizMsgCrypt algorithm).

Signature: sha1 of the sorted, concatenated [token, timestamp, nonce, encrypt].
Cipher: AES-256-CBC, key = b64decode(EncodingAESKey + "="), IV = key[:16], and PKCS#7 to a
**32-byte** block; plaintext = random16 ‖ uint32be(len(msg)) ‖ msg ‖ receiveid.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import struct

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

ENCODING_AES_KEY_CHARS = 43
PAD_BLOCK_BITS = 256  # WeCom pads to 32 bytes, not AES's 16


class WeComCryptoError(ValueError):
    """The ciphertext cannot be opened with this key."""


class ReceiveIdMismatch(WeComCryptoError):
    """The message decrypted, but was encrypted for another corp (or suite)."""


def signature(token: str, timestamp: str, nonce: str, encrypted: str) -> str:
    return hashlib.sha1("".join(sorted([token, timestamp, nonce, encrypted])).encode()).hexdigest()


def aes_key(encoding_aes_key: str) -> bytes:
    """The 32-byte key an EncodingAESKey stands for; ValueError if it is not one."""
    if len(encoding_aes_key) != ENCODING_AES_KEY_CHARS:
        raise ValueError(f"an EncodingAESKey has {ENCODING_AES_KEY_CHARS} characters")
    try:
        key = base64.b64decode(encoding_aes_key + "=", validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("an EncodingAESKey is base64 text") from exc
    if len(key) != 32:
        raise ValueError("an EncodingAESKey decodes to 32 bytes")
    return key


class WeComCrypto:
    """Encrypt and decrypt for one app: its EncodingAESKey and receive id (the CorpID)."""

    def __init__(self, encoding_aes_key: str, receive_id: str) -> None:
        self._key = aes_key(encoding_aes_key)
        self.receive_id = receive_id

    def _cipher(self) -> Cipher[modes.CBC]:
        return Cipher(algorithms.AES(self._key), modes.CBC(self._key[:16]))

    def decrypt(self, encrypted: str) -> bytes:
        """The message inside ``encrypted``, after checking it was meant for receive_id."""
        try:
            raw = base64.b64decode(encrypted, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise WeComCryptoError("the ciphertext is not base64") from exc
        if not raw or len(raw) % 16:
            raise WeComCryptoError("the ciphertext is not whole AES blocks")
        decryptor = self._cipher().decryptor()
        padded = decryptor.update(raw) + decryptor.finalize()
        unpadder = padding.PKCS7(PAD_BLOCK_BITS).unpadder()
        try:
            plain = unpadder.update(padded) + unpadder.finalize()
        except ValueError as exc:
            raise WeComCryptoError("bad padding: wrong EncodingAESKey or damaged body") from exc
        if len(plain) < 20:
            raise WeComCryptoError("the plaintext is too short")
        (length,) = struct.unpack(">I", plain[16:20])
        if 20 + length > len(plain):
            raise WeComCryptoError("the message length runs past the plaintext")
        message, receive_id = plain[20 : 20 + length], plain[20 + length :]
        if receive_id.decode("utf-8", "replace") != self.receive_id:
            raise ReceiveIdMismatch(
                f"the message is for receive id {receive_id.decode('utf-8', 'replace')!r}, "
                f"not {self.receive_id!r}"
            )
        return message

    def encrypt(self, message: bytes, random16: bytes | None = None) -> str:
        random16 = os.urandom(16) if random16 is None else random16
        plain = random16 + struct.pack(">I", len(message)) + message + self.receive_id.encode()
        padder = padding.PKCS7(PAD_BLOCK_BITS).padder()
        padded = padder.update(plain) + padder.finalize()
        encryptor = self._cipher().encryptor()
        return base64.b64encode(encryptor.update(padded) + encryptor.finalize()).decode()
