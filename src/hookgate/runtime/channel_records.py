"""Channel records: each channel's config, secrets included, encrypted at rest with Fernet
(the rows themselves: storage/channel_records.py).

The key comes from ``HOOKGATE_SECRETS_KEY``: one or more Fernet keys separated by commas.
The first encrypts; every one of them decrypts, so a key is rotated by putting the new one
first, re-encrypting the stored rows (``hookgate secrets rotate``), then dropping the old.
There is no unencrypted fallback: a server with channels and no key does not start.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from hookgate.runtime.deployment import ChannelSpec
from hookgate.storage.channel_records import (
    StoredChannel,
    read_channels,
    reseal_all,
    write_channels,
)
from hookgate.storage.database import Database

SECRETS_KEY_ENV = "HOOKGATE_SECRETS_KEY"


class SecretsKeyError(Exception):
    """``HOOKGATE_SECRETS_KEY`` is missing or holds something that is not a Fernet key."""


class ChannelSecretsUnreadable(Exception):
    """A stored channel config cannot be decrypted with any of the configured keys."""


class SecretsKey:
    """The configured Fernet keys: the first encrypts, all of them decrypt."""

    def __init__(self, keys: Sequence[str]) -> None:
        # Imported when a key is used: a server without channels never needs cryptography.
        from cryptography.fernet import Fernet, MultiFernet

        if not keys:
            raise SecretsKeyError(f"{SECRETS_KEY_ENV} holds no key")
        fernets = []
        for position, key in enumerate(keys, start=1):
            try:
                fernets.append(Fernet(key.encode("ascii")))
            except (ValueError, UnicodeEncodeError):
                # Never echo the value: it may be a real key with a typo in it.
                raise SecretsKeyError(
                    f"{SECRETS_KEY_ENV}: key {position} of {len(keys)} is not a Fernet key "
                    "(32 url-safe base64-encoded bytes); create one with "
                    "'hookgate secrets generate-key'"
                ) from None
        self._fernet = MultiFernet(fernets)
        self.count = len(fernets)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> SecretsKey:
        """The key list in ``HOOKGATE_SECRETS_KEY``; SecretsKeyError when unset or bad."""
        raw = (os.environ if environ is None else environ).get(SECRETS_KEY_ENV, "")
        keys = [k.strip() for k in raw.split(",") if k.strip()]
        if not keys:
            raise SecretsKeyError(
                f"channels are configured but {SECRETS_KEY_ENV} is not set: channel secrets "
                "are stored encrypted and there is no unencrypted mode. Create a key with "
                f"'hookgate secrets generate-key' and export {SECRETS_KEY_ENV}=<key> "
                "(keep it out of the configuration file and the database)"
            )
        return cls(keys)

    @staticmethod
    def generate() -> str:
        from cryptography.fernet import Fernet

        return Fernet.generate_key().decode("ascii")

    def seal(self, config: Mapping[str, Any]) -> str:
        """``config`` as JSON, encrypted with the first key."""
        plain = json.dumps(dict(config), sort_keys=True, separators=(",", ":"))
        return self._fernet.encrypt(plain.encode("utf-8")).decode("ascii")

    def open(self, sealed: str, *, channel_id: str) -> dict[str, Any]:
        """The config ``seal`` produced; ChannelSecretsUnreadable when no key fits."""
        from cryptography.fernet import InvalidToken

        try:
            plain = self._fernet.decrypt(sealed.encode("ascii"))
        except (InvalidToken, UnicodeEncodeError):
            raise self._unreadable(channel_id) from None
        config = json.loads(plain)
        if not isinstance(config, dict):
            raise self._unreadable(channel_id)
        return config

    def reseal(self, sealed: str, *, channel_id: str) -> str:
        """The same config encrypted with the first key (for rotation)."""
        from cryptography.fernet import InvalidToken

        try:
            return self._fernet.rotate(sealed.encode("ascii")).decode("ascii")
        except (InvalidToken, UnicodeEncodeError):
            raise self._unreadable(channel_id) from None

    def _unreadable(self, channel_id: str) -> ChannelSecretsUnreadable:
        return ChannelSecretsUnreadable(
            f"channel '{channel_id}': its stored config cannot be decrypted with any of the "
            f"{self.count} key(s) in {SECRETS_KEY_ENV} (was it encrypted with a key that "
            "has since been dropped?)"
        )


async def store_channels(db: Database, specs: Sequence[ChannelSpec], key: SecretsKey) -> None:
    """Write the declared channels, configs encrypted, in declaration order.

    Rows of channels no longer declared are kept (their requests still name them) but
    disabled. Upserts: instances starting together write the same rows without racing.
    """
    await write_channels(db, [
        StoredChannel(spec.id, spec.type, spec.org, spec.enabled, key.seal(spec.config),
                      position) for position, spec in enumerate(specs)])


async def load_channels(db: Database, key: SecretsKey) -> list[ChannelSpec]:
    """Every stored channel with its config decrypted, in declaration order."""
    return [ChannelSpec(c.id, c.type, c.org_id,
                        key.open(c.sealed_config, channel_id=c.id) if c.sealed_config else {},
                        c.enabled)
            for c in await read_channels(db)]


async def rotate_channel_secrets(db: Database, key: SecretsKey) -> int:
    """Re-encrypt every stored config with the first key, all or nothing; the count."""
    return await reseal_all(db, lambda sealed, channel_id: key.reseal(
        sealed, channel_id=channel_id))
