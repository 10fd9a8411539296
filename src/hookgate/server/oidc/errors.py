"""The one error of signing in through an identity provider (importable without Authlib)."""

from __future__ import annotations


class OidcError(Exception):
    """Signing in through the provider failed; the message says what and why."""
