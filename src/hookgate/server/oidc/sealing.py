"""The provider's refresh tokens sealed at rest: encrypted with ``HOOKGATE_SECRETS_KEY`` (the
channel secrets' Fernet keys) before a session row holds one, opened only to re-check it. A
provider that returns refresh tokens without the key set fails the sign-in closed."""

from __future__ import annotations

import os
from collections.abc import Mapping

from hookgate.runtime.channel_records import (
    SECRETS_KEY_ENV,
    ChannelSecretsUnreadable,
    SecretsKey,
)
from hookgate.server.oidc.errors import OidcError

#: The one field of a sealed refresh token's JSON.
_FIELD = "refresh_token"
#: Names a sealed token in the key's errors (it is no channel).
_WHAT = "oidc-session"


class RefreshSeal:
    """Seals and opens refresh tokens with the configured keys (None: none configured)."""

    def __init__(self, key: SecretsKey | None) -> None:
        self.key = key

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> RefreshSeal:
        """The keys in ``HOOKGATE_SECRETS_KEY``; none when it is unset (SecretsKeyError when
        it holds something that is not a key list)."""
        env = os.environ if environ is None else environ
        if not env.get(SECRETS_KEY_ENV, "").strip():
            return cls(None)
        return cls(SecretsKey.from_environment(env))

    def seal(self, token: str) -> str:
        if self.key is None:
            raise OidcError(f"the identity provider returned a refresh token and "
                            f"{SECRETS_KEY_ENV} is not set: refresh tokens are stored "
                            "encrypted; create a key with 'hookgate secrets generate-key' "
                            f"and export {SECRETS_KEY_ENV}=<key> on every instance")
        return self.key.seal({_FIELD: token})

    def open(self, sealed: str) -> str:
        if self.key is None:
            raise OidcError(f"the session's refresh token is sealed and {SECRETS_KEY_ENV} is "
                            "not set: sign in again once it is")
        try:
            token = self.key.open(sealed, channel_id=_WHAT).get(_FIELD)
        except ChannelSecretsUnreadable:
            token = None
        if not isinstance(token, str):
            raise OidcError(f"the session's refresh token cannot be decrypted with any key in "
                            f"{SECRETS_KEY_ENV} (was it sealed with a key since dropped?): "
                            "sign in again")
        return token

    def reseal(self, sealed: str) -> str:
        """``sealed`` encrypted again with the first key (key rotation)."""
        if self.key is None:
            raise OidcError(f"{SECRETS_KEY_ENV} is not set")
        return self.key.reseal(sealed, channel_id=_WHAT)
